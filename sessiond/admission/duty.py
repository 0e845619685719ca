"""Duty cycle per session: the fraction of wall time it demands generation over a sliding window.

A world session demands generation while it plays (attached and not paused); a director session
demands the media duration of each segment from its `direct` (cut short by an interrupt). Until a
session has been watched for a whole window its duty blends its measurement with the prior of its
mode and current state, weighted by how much of the window has been observed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Protocol

from sessiond.admission.errors import AdmissionConfigError, UnknownSession

__all__ = ["DutyPriors", "DutyTracker", "ModeDuties", "SessionDutyState"]


class ModeDuties(Protocol):
    """Measured duty per mode, e.g. a trace's (loadtest.trace_tools.trace_duty.TraceStats)."""

    def mean_duty(self, mode: str) -> float | None: ...


@dataclass(frozen=True)
class DutyPriors:
    world_playing: float = 1.0
    world_paused: float = 0.0
    director: float = 0.3

    def __post_init__(self) -> None:
        for name in ("world_playing", "world_paused", "director"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise AdmissionConfigError(f"prior_{name}", f"must be in [0, 1], got {value}")

    def prior(self, mode: str, paused: bool = False) -> float:
        if mode == "director":
            return self.director
        return self.world_paused if paused else self.world_playing

    def refreshed(self, stats: ModeDuties) -> DutyPriors:
        """Priors taken from a trace's measured duties (modes absent from the trace keep theirs)."""
        world, director = stats.mean_duty("world"), stats.mean_duty("director")
        return replace(self, world_playing=self.world_playing if world is None else world,
                       director=self.director if director is None else director)

    def to_json(self) -> dict[str, float]:
        return {"world_playing": self.world_playing, "world_paused": self.world_paused, "director": self.director}


@dataclass
class SessionDutyState:
    mode: str
    added_at: float
    paused: bool = False
    intervals: deque[tuple[float, float]] = field(default_factory=deque)  # closed demand intervals
    open_since: float | None = None  # demand with no planned end (world playing)
    planned: tuple[float, float] | None = None  # demand with a planned end (director segment)
    fed: bool = False  # the daemon has reported demand for it; until then it counts at its prior


class DutyTracker:
    """Demand intervals per session; ``duty(sid, now)`` over the last ``window_s`` seconds."""

    def __init__(self, priors: DutyPriors | None = None, window_s: float = 60.0) -> None:
        if window_s <= 0:
            raise AdmissionConfigError("duty_window_s", f"must be > 0 seconds, got {window_s}")
        self.priors = priors or DutyPriors()
        self.window_s = window_s
        self._sessions: dict[str, SessionDutyState] = {}

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def sessions(self) -> list[str]:
        return list(self._sessions)

    def mode(self, session_id: str) -> str:
        return self._state(session_id).mode

    def add(self, session_id: str, mode: str, now: float) -> None:
        if mode not in ("world", "director"):
            raise AdmissionConfigError("mode", f"must be world or director, got {mode!r}")
        self._sessions[session_id] = SessionDutyState(mode, now)

    def remove(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def begin(self, session_id: str, now: float, media_s: float | None = None) -> None:
        """The session starts demanding: open-ended (world playing) or for `media_s` (a segment)."""
        self.end(session_id, now)
        state = self._state(session_id)
        state.fed = True
        if media_s is None:
            state.open_since = now
        else:
            state.planned = (now, now + media_s)

    def end(self, session_id: str, now: float) -> None:
        """Demand stops now (pause, detach, interrupt, segment over)."""
        state = self._state(session_id)
        state.fed = True
        if state.open_since is not None:
            state.intervals.append((state.open_since, now))
            state.open_since = None
        if state.planned is not None:
            start, stop = state.planned
            state.intervals.append((start, min(stop, now)))
            state.planned = None
        self._prune(state, now)

    def set_paused(self, session_id: str, paused: bool, now: float) -> None:
        state = self._state(session_id)
        state.paused = paused
        if paused:
            self.end(session_id, now)
        else:
            self.begin(session_id, now)

    def demanding(self, session_id: str, now: float) -> bool:
        state = self._state(session_id)
        return state.open_since is not None or (state.planned is not None and state.planned[1] > now)

    def prior(self, session_id: str) -> float:
        state = self._state(session_id)
        return self.priors.prior(state.mode, state.paused)

    def measured(self, session_id: str, now: float) -> float | None:
        """Demand over the observed part of the window; None before any time has passed or before
        any demand was reported for the session."""
        state = self._state(session_id)
        if not state.fed:
            return None
        start = max(state.added_at, now - self.window_s)
        span = now - start
        if span <= 0:
            return None
        busy = sum(max(0.0, min(b, now) - max(a, start)) for a, b in self._all_intervals(state))
        return min(1.0, busy / span)

    def duty(self, session_id: str, now: float) -> float:
        """Measurement weighted by the observed share of the window; the prior fills the rest."""
        state = self._state(session_id)
        measured = self.measured(session_id, now)
        observed = min(self.window_s, max(0.0, now - state.added_at))
        prior = self.priors.prior(state.mode, state.paused)
        if measured is None:
            return prior
        return (prior * (self.window_s - observed) + measured * observed) / self.window_s

    def snapshot(self, now: float) -> dict[str, dict[str, object]]:
        return {sid: {"mode": s.mode, "duty": self.duty(sid, now), "measured": self.measured(sid, now),
                      "prior": self.priors.prior(s.mode, s.paused), "paused": s.paused,
                      "demanding": self.demanding(sid, now)} for sid, s in self._sessions.items()}

    def _state(self, session_id: str) -> SessionDutyState:
        state = self._sessions.get(session_id)
        if state is None:
            raise UnknownSession(session_id)
        return state

    def _all_intervals(self, state: SessionDutyState) -> list[tuple[float, float]]:
        out = list(state.intervals)
        if state.open_since is not None:
            out.append((state.open_since, float("inf")))
        if state.planned is not None:
            out.append(state.planned)
        return out

    def _prune(self, state: SessionDutyState, now: float) -> None:
        while state.intervals and state.intervals[0][1] < now - self.window_s:
            state.intervals.popleft()
