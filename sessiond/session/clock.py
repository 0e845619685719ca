"""The world playback clock: where the viewer's playback is, so generation keeps a small lead.

Frames are counted on the session's timeline (`total` = frames handed to the output or
generated). The frame at timeline position i plays at anchor_t + (i - anchor_i) / fps. When the
viewer's buffer runs dry the clock re-anchors at now (never fast-forwards)."""

from __future__ import annotations

__all__ = ["PlaybackClock"]


class PlaybackClock:
    def __init__(self, fps: int, now: float, total: int = 0) -> None:
        self.fps = fps
        self.anchor_t = now
        self.anchor_i = total
        self.anchors = 0  # re-anchors so far: a deadline computed before one does not follow the ones after

    def position(self, now: float) -> float:
        return self.anchor_i + (now - self.anchor_t) * self.fps

    def reanchor(self, now: float, total: int) -> None:
        self.anchor_t = now
        self.anchor_i = total
        self.anchors += 1

    def buffered(self, now: float, total: int) -> float:
        """Frames ahead of playback (negative: the viewer starved)."""
        return total - self.position(now)

    def dry_at(self, total: int) -> float:
        """When playback reaches `total`: the deadline of the frame at that position."""
        return self.anchor_t + (total - self.anchor_i) / self.fps

    def arrive(self, now: float, before: int) -> bool:
        """A chunk whose first frame is at position `before` arrives now. Re-anchors and returns
        True when it came after its playback deadline (a miss)."""
        if self.position(now) > before:
            self.reanchor(now, before)
            return True
        return False
