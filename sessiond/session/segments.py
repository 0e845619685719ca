"""Director segments: one per `direct`, `frames_target` frames long (seconds x fps). Chunks are
generated until the segment has that many frames; the last chunk's surplus frames are cut.
Its `segment_start` and `segment_end` are markers in the output stream, built when handed out
(their pts depend on what was sent by then).

Every segment has a planned start delay `delay_s` (from `direct` until its playback may start;
admission's cost model plans it for the load at the time); frame n plays at `started_at +
delay_s + n / fps`, which is its scheduling deadline. `segment_start.start_after_ms` tells the
client how long after receiving it to start playing: what is left of the planned delay, or,
without a model, the delay the generation rate observed so far needs (`observed_start_after`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from protocols.messages import SegmentEnd, SegmentStart
from protocols.timeline import pts_for
from sessiond.session.output import OutputStream

__all__ = ["Segment", "end_marker", "observed_start_after", "start_marker"]


@dataclass
class Segment:
    id: int
    re: int | None
    frames_target: int
    started_at: float
    delay_s: float = 1.0  # planned start delay: frame n plays at started_at + delay_s + n / fps
    planned: bool = False  # delay_s comes from admission's cost model
    starts_stream: bool = False  # a lead-in chunk is generated first (a session's first segment, after a cut)
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


def observed_start_after(segment: Segment, now: float, fps: int, chunk_frames: int, jitter_s: float) -> float:
    """Seconds from now until playback may start so that the segment plays without a stall, if
    the rest is generated at the rate observed since `direct`: with m media seconds made, L in
    all and chunks of cm, the chunk at x is ready at now + (x + cm - m) / r and plays at
    now + a + x, so a >= max((L - m) / r - (L - cm), cm / r - m)."""
    made = segment.frames_generated / fps
    total = segment.frames_target / fps
    elapsed = now - segment.started_at
    if made >= total or made <= 0:
        return jitter_s
    rate = made / elapsed if elapsed > 0 else math.inf
    cm = min(chunk_frames / fps, total)
    return max(0.0, (total - made) / rate - (total - cm), cm / rate - made) + jitter_s


def start_marker(segment: Segment, out: OutputStream, chunk_frames: int, jitter_s: float
                 ) -> Callable[[], SegmentStart]:
    sid, re = segment.id, segment.re

    def build() -> SegmentStart:
        now = time.monotonic()
        if segment.planned:
            after = max(0.0, segment.started_at + segment.delay_s - now)
        else:
            after = observed_start_after(segment, now, out.fps, chunk_frames, jitter_s)
        return SegmentStart(segment=sid, pts=pts_for(out.next_idx, out.fps), re=re,
                            start_after_ms=math.ceil(after * 1000.0))

    return build


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
