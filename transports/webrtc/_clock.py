"""The media clock that paces a stream: each frame leaves at its pts, never in a burst.

Anchored on the first frame (wall time t0 <-> pts0), frame `pts` is due at
t0 + (pts - pts0) / 90 kHz. A frame later than `late_reset_s` past its due time (a slow chunk,
a stall, or a director session idle between segments) re-anchors the clock on itself instead of
rushing the following frames out to catch up. So no two frames leave closer together than their
pts distance minus `late_reset_s` (the stream uses a quarter of a frame interval): a receiver
sees an even stream that sometimes pauses, never a burst, which would grow its jitter buffer.

`catch_up_frames` (a stream of frames that were already paced once, e.g. the spectators' shared
stream, fed with what the owner's transport sent): the anchor is taken at the first frame this
stream gets, which may be one the owner got some time before (a joiner starts with the newest
frame), and that delay would then hold every later frame for the whole stream (co-players in
Chromium saw their actions 409-438 ms after sending them against the owner's 310-320). So when
every one of the last `catch_up_frames` frames was held by more than `CATCH_UP_MIN_S`, the anchor
moves earlier by the least of those holds: the stream keeps its spacing and loses the offset.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from protocols.timeline import pts_seconds

__all__ = ["CATCH_UP_MIN_S", "MediaClock"]

CATCH_UP_MIN_S = 0.005  # a hold at least this long on every frame of the window is an offset, not spacing


class MediaClock:
    def __init__(self, late_reset_s: float, now: Callable[[], float] = time.monotonic,
                 catch_up_frames: int | None = None) -> None:
        if late_reset_s <= 0:
            raise ValueError(f"late_reset_s must be positive, got {late_reset_s}")
        if catch_up_frames is not None and catch_up_frames < 1:
            raise ValueError(f"catch_up_frames must be at least 1, got {catch_up_frames}")
        self.late_reset_s = late_reset_s
        self._now = now
        self._anchor: tuple[float, int] | None = None
        self._holds: deque[float] | None = None if catch_up_frames is None else deque(maxlen=catch_up_frames)
        self.resets = 0  # re-anchors after the first one
        self.catch_ups = 0  # anchors moved earlier (catch_up_frames)

    def delay(self, pts: int) -> float:
        """Seconds to wait before sending the frame with this pts (0: send now)."""
        now = self._now()
        if self._anchor is None:
            self._anchor = (now, pts)
            return 0.0
        t0, pts0 = self._anchor
        due = t0 + pts_seconds(pts - pts0)
        if pts < pts0 or now - due > self.late_reset_s:
            self._anchor = (now, pts)
            self.resets += 1
            if self._holds is not None:
                self._holds.clear()
            return 0.0
        hold = max(0.0, due - now)
        holds = self._holds
        if holds is not None:
            holds.append(hold)
            if len(holds) == holds.maxlen and (least := min(holds)) > CATCH_UP_MIN_S:
                self._anchor = (t0 - least, pts0)
                self.catch_ups += 1
                holds.clear()
                hold -= least
        return hold
