"""Feeding the duty tracker from the daemon's session states, polled (e.g. each scheduler tick).

World: demands while active (playing to a viewer); a pause switches its prior to the paused one.
Director: each new segment demands its media duration from when it is first seen (a segment
done early keeps its full media time: duty counts media seconds asked for, not wall time spent);
whether it starts a stream (a lead-in chunk first) goes to the tracker's share of such segments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sessiond.admission.duty import DutyTracker

__all__ = ["DemandState", "DemandSync"]


@dataclass(frozen=True)
class DemandState:
    active: bool  # generating, or playing to an attached viewer
    paused: bool = False
    segment: int | None = None  # director: the segment in progress
    segment_media_s: float | None = None  # its media duration
    starts_stream: bool = False  # the segment generates a lead-in chunk first (a session's first, after a cut)


class DemandSync:
    """Turns successive snapshots of session states into tracker begin / end calls."""

    def __init__(self, tracker: DutyTracker) -> None:
        self.tracker = tracker
        self._last: dict[str, DemandState] = {}

    def update(self, states: Mapping[str, DemandState], now: float) -> None:
        for sid in [s for s in self._last if s not in states or s not in self.tracker]:
            del self._last[sid]
        for sid, state in states.items():
            if sid not in self.tracker:
                continue
            prev = self._last.get(sid)
            if prev == state:
                continue
            self._last[sid] = state
            if self.tracker.mode(sid) == "director":
                self._director(sid, prev, state, now)
            else:
                self._world(sid, prev, state, now)

    def _world(self, sid: str, prev: DemandState | None, state: DemandState, now: float) -> None:
        if prev is None or prev.paused != state.paused:
            self.tracker.set_paused(sid, state.paused, now)
        if state.active:
            if not self.tracker.demanding(sid, now):
                self.tracker.begin(sid, now)
        elif prev is None or prev.active or self.tracker.demanding(sid, now):
            self.tracker.end(sid, now)

    def _director(self, sid: str, prev: DemandState | None, state: DemandState, now: float) -> None:
        if state.segment is not None and (prev is None or prev.segment != state.segment):
            self.tracker.begin(sid, now, media_s=state.segment_media_s or 0.0, starts_stream=state.starts_stream)
        elif prev is None:
            self.tracker.end(sid, now)  # seen idle: measured from now on
