"""Director segments: one per `direct`, `frames_target` frames long (seconds x fps). Chunks are
generated until the segment has that many frames; the last chunk's surplus frames are cut.
Its `segment_start` and `segment_end` are markers in the output stream, built when handed out
(their pts depend on what was sent by then)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from protocols.messages import SegmentEnd, SegmentStart
from protocols.timeline import pts_for
from sessiond.session.output import OutputStream

__all__ = ["Segment", "end_marker", "start_marker"]


@dataclass
class Segment:
    id: int
    re: int | None
    frames_target: int
    started_at: float
    frames_generated: int = 0  # frames of this segment put in the outbox
    start_sent: bool = False

    @property
    def complete(self) -> bool:
        return self.frames_generated >= self.frames_target

    def take(self, n: int) -> int:
        """How many of a chunk's `n` frames belong to the segment (the rest are cut); counts them."""
        keep = min(n, max(0, self.frames_target - self.frames_generated))
        self.frames_generated += keep
        return keep


def start_marker(segment: Segment, out: OutputStream) -> Callable[[], SegmentStart]:
    sid, re = segment.id, segment.re
    return lambda: SegmentStart(segment=sid, pts=pts_for(out.next_idx, out.fps), re=re)


def end_marker(segment: Segment, status: str, out: OutputStream) -> Callable[[], SegmentEnd]:
    """Built when handed out (after every frame of the segment was): the frames of this segment
    that were or will be sent; a `done` overtaken by a flush ends `interrupted`."""
    generation = out.generation

    def build() -> SegmentEnd:
        frames = out.segment_frames(segment.id)
        out.forget_segment(segment.id)
        ended = status if out.generation == generation else "interrupted"
        return SegmentEnd(segment=segment.id, pts=pts_for(out.next_idx, out.fps), frames=frames, status=ended,
                          re=segment.re)

    return build
