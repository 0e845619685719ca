"""The media clock that paces a stream: each frame leaves at its pts, never in a burst.

Anchored on the first frame (wall time t0 <-> pts0), frame `pts` is due at
t0 + (pts - pts0) / 90 kHz. A frame later than `late_reset_s` past its due time (a slow chunk,
a stall, or a director session idle between segments) re-anchors the clock on itself instead of
rushing the following frames out to catch up. So no two frames leave closer together than their
pts distance minus `late_reset_s` (the stream uses a quarter of a frame interval): a receiver
sees an even stream that sometimes pauses, never a burst, which would grow its jitter buffer.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from protocols.timeline import pts_seconds

__all__ = ["MediaClock"]


class MediaClock:
    def __init__(self, late_reset_s: float, now: Callable[[], float] = time.monotonic) -> None:
        if late_reset_s <= 0:
            raise ValueError(f"late_reset_s must be positive, got {late_reset_s}")
        self.late_reset_s = late_reset_s
        self._now = now
        self._anchor: tuple[float, int] | None = None
        self.resets = 0  # re-anchors after the first one

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
            return 0.0
        return max(0.0, due - now)
