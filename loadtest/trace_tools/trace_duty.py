"""What a trace says about its users: duty cycle per mode (the admission prior's source)."""

from __future__ import annotations

from dataclasses import dataclass

from sessiond.traces.format import Trace, TraceEvent

__all__ = ["DEFAULT_SEGMENT_S", "SessionDuty", "TraceStats", "session_duty", "trace_stats"]

DEFAULT_SEGMENT_S = 5.0  # a `direct` without `seconds` asks for the daemon's default segment


@dataclass(frozen=True)
class SessionDuty:
    session: str
    mode: str
    lifetime_s: float
    demand_s: float  # wall seconds in which the session demands generation

    @property
    def duty(self) -> float:
        return min(1.0, self.demand_s / self.lifetime_s) if self.lifetime_s > 0 else 0.0


@dataclass(frozen=True)
class TraceStats:
    sessions: tuple[SessionDuty, ...]
    peak_concurrent: int

    def mean_duty(self, mode: str) -> float | None:
        """Demand-weighted duty of one mode: total demand over total lifetime; None if absent."""
        of_mode = [s for s in self.sessions if s.mode == mode]
        life = sum(s.lifetime_s for s in of_mode)
        return min(1.0, sum(s.demand_s for s in of_mode) / life) if life > 0 else None

    def to_json(self) -> dict[str, object]:
        return {"sessions": len(self.sessions), "peak_concurrent": self.peak_concurrent,
                "duty": {m: self.mean_duty(m) for m in ("world", "director")}}


def session_duty(events: list[TraceEvent], segment_s: float = DEFAULT_SEGMENT_S) -> SessionDuty:
    """World: demands while attached and not paused. Director: a segment demands its media
    duration from its `direct` (truncated by an interrupt, a newer direct or the end)."""
    first, last = events[0], events[-1]
    mode = str(first.fields.get("mode", "world"))
    demand, since = 0.0, None  # since: start of the current demanding interval
    until = 0.0  # director: end of the current segment's demand
    for e in events:
        if mode == "world":
            if e.ev in ("create", "resume", "attach") and since is None:
                since = e.t
            elif e.ev in ("pause", "detach", "close") and since is not None:
                demand, since = demand + e.t - since, None
        elif e.ev == "direct":
            if since is not None:
                demand += min(e.t, until) - since
            since, until = e.t, e.t + float(e.fields.get("seconds", segment_s))
        elif e.ev in ("interrupt", "close") and since is not None:
            demand, since = demand + min(e.t, until) - since, None
    if since is not None:
        demand += (last.t if mode == "world" else min(last.t, until)) - since
    return SessionDuty(first.s, mode, last.t - first.t, max(0.0, demand))


def trace_stats(trace: Trace, segment_s: float = DEFAULT_SEGMENT_S) -> TraceStats:
    sessions = tuple(session_duty(trace.events_of(s), segment_s) for s in trace.sessions())
    live, peak = 0, 0
    for e in trace.events:
        live += {"create": 1, "close": -1}.get(e.ev, 0)
        peak = max(peak, live)
    return TraceStats(sessions, peak)
