"""Duty cycle per session: the fraction of wall time it demands generation over a sliding window.

A world session demands generation while it plays (attached and not paused); a director session
demands the media duration of each segment from its `direct` (cut short by an interrupt). Until a
session has been watched for a whole window its duty blends its measurement with the prior of its
mode and current state, weighted by how much of the window has been observed.

A director's prior is measured once the daemon has served enough directors (`DirectorPrior`): a
high quantile of the duties its directors showed (each director's demand over a window it was
watched for, or over its life when it closed sooner), the configured prior only until then. A
daemon whose directors direct more often than the configured prior says then counts a new one,
and one not yet watched for a whole window, at what its directors actually do. Likewise the share
of directors' segments that start a stream (`StreamStarts`: a session's first segment and the first
after a cut generate a lead-in chunk first, so they need a faster rate; `feasibility.GroupModel`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Protocol

from sessiond.admission.errors import AdmissionConfigError, UnknownSession

__all__ = ["DirectorPrior", "DutyPriors", "DutyTracker", "ModeDuties", "SessionDutyState", "StreamStarts"]


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


class DirectorPrior:
    """The director prior this daemon has measured: the `quantile` of the last `keep` duties its
    directors showed, once `min_samples` were seen; `configured` until then.

    A sample is one director's demand over a span it was watched for: a whole duty window while it
    stays open (one sample per window), or what it was watched for since its last sample when it
    closes, if that was at least `min_span_s`. A high quantile, not the mean: a new director's duty
    is unknown until it has been watched, and admission commits to it for the session's life, so it
    counts at a duty most directors (the quantile) did not exceed."""

    def __init__(self, configured: float, *, quantile: float = 0.9, min_samples: int = 3, keep: int = 32,
                 min_span_s: float = 15.0) -> None:
        if not 0.0 <= quantile <= 1.0:
            raise AdmissionConfigError("director_prior_quantile", f"must be in [0, 1], got {quantile}")
        if min_samples < 1 or keep < min_samples:
            raise AdmissionConfigError("director_prior_samples", f"need 1 <= min_samples <= keep, got "
                                       f"{min_samples}, {keep}")
        if min_span_s <= 0:
            raise AdmissionConfigError("director_prior_min_span_s", f"must be > 0 seconds, got {min_span_s}")
        self.configured = configured
        self.quantile = quantile
        self.min_samples = min_samples
        self.min_span_s = min_span_s
        self._samples: deque[float] = deque(maxlen=keep)
        self._seen = 0

    def add(self, duty: float) -> None:
        """One director's measured duty (clamped to [0, 1])."""
        self._samples.append(min(1.0, max(0.0, duty)))
        self._seen += 1

    @property
    def measured(self) -> bool:
        """True once enough directors were seen for the measured prior to stand."""
        return len(self._samples) >= self.min_samples

    @property
    def value(self) -> float:
        """The prior a new director counts at."""
        return _quantile(sorted(self._samples), self.quantile) if self.measured else self.configured

    def to_json(self) -> dict[str, object]:
        samples = sorted(self._samples)
        return {"value": round(self.value, 4), "source": "measured" if self.measured else "configured",
                "configured": self.configured, "quantile": self.quantile, "samples": len(samples),
                "min_samples": self.min_samples, "directors_seen": self._seen,
                "samples_mean": round(sum(samples) / len(samples), 4) if samples else None,
                "samples_max": round(samples[-1], 4) if samples else None}


class StreamStarts:
    """The share of directors' segments that start a stream (a session's first, the first after a
    cut) over the last `keep` segments, the `configured` share counting as `prior_segments` of them
    (0, worth 10: a fresh daemon plans every segment at the plain rate, as admission did before it
    measured this, and each segment seen moves it; no threshold for one segment more to cross)."""

    def __init__(self, configured: float = 0.0, *, prior_segments: int = 10, keep: int = 200) -> None:
        if not 0.0 <= configured <= 1.0:
            raise AdmissionConfigError("stream_start_share", f"must be in [0, 1], got {configured}")
        if prior_segments < 0 or keep < 1:
            raise AdmissionConfigError("stream_start_segments", f"need prior_segments >= 0 and keep >= 1, got "
                                       f"{prior_segments}, {keep}")
        self.configured = configured
        self.prior_segments = prior_segments
        self._segments: deque[bool] = deque(maxlen=keep)

    def add(self, starts_stream: bool) -> None:
        self._segments.append(bool(starts_stream))

    @property
    def value(self) -> float:
        """The chance that a director's segment starts a stream."""
        n = len(self._segments)
        if n + self.prior_segments == 0:
            return self.configured
        return (sum(self._segments) + self.configured * self.prior_segments) / (n + self.prior_segments)

    def to_json(self) -> dict[str, object]:
        return {"value": round(self.value, 4), "configured": self.configured,
                "prior_segments": self.prior_segments, "segments": len(self._segments),
                "stream_starts": sum(self._segments)}


def _quantile(ordered: list[float], q: float) -> float:
    """The q-quantile of sorted values, linear between order statistics."""
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class SessionDutyState:
    mode: str
    added_at: float
    paused: bool = False
    intervals: deque[tuple[float, float]] = field(default_factory=deque)  # closed demand intervals
    open_since: float | None = None  # demand with no planned end (world playing)
    planned: tuple[float, float] | None = None  # demand with a planned end (director segment)
    fed: bool = False  # the daemon has reported demand for it; until then it counts at its prior
    sampled_at: float | None = None  # director: when its duty last went to the measured prior (None: added)
    segments: int = 0  # director: segments begun so far


class DutyTracker:
    """Demand intervals per session; ``duty(sid, now)`` over the last ``window_s`` seconds."""

    def __init__(self, priors: DutyPriors | None = None, window_s: float = 60.0,
                 director_prior: DirectorPrior | None = None, stream_starts: StreamStarts | None = None) -> None:
        if window_s <= 0:
            raise AdmissionConfigError("duty_window_s", f"must be > 0 seconds, got {window_s}")
        self.priors = priors or DutyPriors()
        self.window_s = window_s
        # the directors' measured prior (module doc): samples of at least a quarter window by default
        self.director_prior = director_prior or DirectorPrior(self.priors.director, min_span_s=window_s / 4)
        self.stream_starts = stream_starts or StreamStarts()
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

    def remove(self, session_id: str, now: float | None = None) -> None:
        """Forget a session; a director closed at `now` leaves its duty since its last sample to the
        measured prior (when watched for at least the prior's `min_span_s`)."""
        state = self._sessions.pop(session_id, None)
        if state is not None and now is not None:
            self._sample(state, now, self.director_prior.min_span_s)

    def begin(self, session_id: str, now: float, media_s: float | None = None, starts_stream: bool = False) -> None:
        """The session starts demanding: open-ended (world playing) or for `media_s` (a segment;
        `starts_stream`: it generates a lead-in chunk first, a session's first or after a cut)."""
        self.end(session_id, now)
        state = self._state(session_id)
        self._sample(state, now, self.window_s)  # a director watched for another whole window
        if state.mode == "director" and media_s is not None:
            self.stream_starts.add(starts_stream)
            state.segments += 1
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

    def first_segment_due(self, session_id: str, now: float, window_s: float) -> float | None:
        """For a director whose first segment is still to come or under way: the seconds until that
        stops being so (it was added `window_s` ago without directing, or its first segment ends);
        None for any other session. Directors who opened together direct their first segments
        together (an arrival burst), not independently at their duty: the admission plans for it."""
        state = self._state(session_id)
        if state.mode != "director" or state.paused:
            return None
        if state.segments == 0:
            left = state.added_at + window_s - now
            return left if left > 0 else None
        if state.segments == 1 and state.planned is not None and state.planned[1] > now:
            return state.planned[1] - now
        return None

    def prior(self, session_id: str) -> float:
        state = self._state(session_id)
        return self.prior_of(state.mode, state.paused)

    def prior_of(self, mode: str, paused: bool = False) -> float:
        """The prior a session of `mode` counts at: a director's the measured one once enough
        directors were seen (`DirectorPrior`), else the configured priors."""
        return self.director_prior.value if mode == "director" else self.priors.prior(mode, paused)

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
        prior = self.prior_of(state.mode, state.paused)
        if measured is None:
            return prior
        return (prior * (self.window_s - observed) + measured * observed) / self.window_s

    def snapshot(self, now: float) -> dict[str, dict[str, object]]:
        return {sid: {"mode": s.mode, "duty": self.duty(sid, now), "measured": self.measured(sid, now),
                      "prior": self.prior_of(s.mode, s.paused), "paused": s.paused,
                      "demanding": self.demanding(sid, now)} for sid, s in self._sessions.items()}

    def _state(self, session_id: str) -> SessionDutyState:
        state = self._sessions.get(session_id)
        if state is None:
            raise UnknownSession(session_id)
        return state

    def _sample(self, state: SessionDutyState, now: float, min_span_s: float) -> None:
        """A director's demand since its last sample (at most a window back) to the measured prior,
        when that span is at least `min_span_s` and the daemon has reported on it."""
        if state.mode != "director" or not state.fed:
            return
        start = max(state.added_at if state.sampled_at is None else state.sampled_at, now - self.window_s)
        span = now - start
        if span < min_span_s or span <= 0:
            return
        busy = sum(max(0.0, min(b, now) - max(a, start)) for a, b in self._all_intervals(state))
        self.director_prior.add(busy / span)
        state.sampled_at = now

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
