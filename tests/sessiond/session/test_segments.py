"""Director segments at the session level: a segment is exactly seconds x fps frames, and its
`segment_end.frames` counts the frames of that segment that were (or will be) sent, however
late they leave the outbox."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.api import ChunkFrames
from protocols.messages import SegmentEnd, SegmentStart
from sessiond.session import ConnectionPort, Session, connect
from tests.sessiond._factory import make_session
from transports.interface import OutChunk


def _chunk(session: Session, n: int) -> None:
    """One engine chunk of `n` frames for the session's segment: begun, decoded, finished."""
    job = session.begin_job(0.0, 0.0)
    session.on_frames(job, ChunkFrames(session.chunks_done, np.zeros((n, 4, 4, 3), np.uint8)))
    session.on_job_done(job)


def _drain(port: ConnectionPort, send: bool = True) -> list[Any]:
    """Everything the connection would take now; frames marked sent when `send`."""
    out = []
    while (item := port._session.out.take()) is not None:
        if isinstance(item, OutChunk):
            for frame in item.frames:
                if send:
                    port.mark_sent(frame)
            out.extend(item.frames)
        else:
            out.append(item)
    return out


async def test_segment_end_counts_frames_that_left_after_its_last_chunk_finished() -> None:
    s = make_session(mode="director")
    port = connect(s, "raw")
    s.start_segment(re=7, seconds=1.0)
    for n in (5, 8, 8):  # nothing is sent until the whole segment is generated
        _chunk(s, n)
    assert s.segment is None
    items = _drain(port)
    end = items[-1]
    assert isinstance(end, SegmentEnd)
    assert (end.segment, end.re, end.frames, end.status, end.pts) == (1, 7, 16, "done", 16 * 5625)
    assert len(items) == 1 + 16 + 1  # segment_start, 16 frames, segment_end


async def test_the_last_chunk_is_cut_to_the_segment_length() -> None:
    s = make_session(mode="director")
    port = connect(s, "raw")
    s.start_segment(re=None, seconds=1.25)  # 20 frames: 8 + 8 + 4 of the third chunk
    for n in (8, 8, 8):
        _chunk(s, n)
    items = _drain(port)
    frames = [i for i in items if not isinstance(i, SegmentStart | SegmentEnd)]
    assert [f.idx for f in frames] == list(range(20))
    assert items[-1].frames == 20
    dropped = s.env.metrics.frames_dropped.labels(reason="segment_end")._value.get()
    assert dropped == 4


async def test_a_segment_wants_no_chunk_once_its_frames_are_generated() -> None:
    s = make_session(mode="director")
    connect(s, "raw")
    s.start_segment(re=None, seconds=0.5)  # 8 frames
    _chunk(s, 5)
    assert s.demand(0.0) is not None
    _chunk(s, 8)
    assert s.segment is None and s.demand(0.0) is None


async def test_a_done_segment_overtaken_by_a_flush_ends_interrupted_with_the_frames_sent() -> None:
    s = make_session(mode="director")
    port = connect(s, "raw")
    s.start_segment(re=3, seconds=1.0)
    _chunk(s, 5)
    first = _drain(port)  # segment_start + 5 frames sent
    assert len(first) == 6
    _chunk(s, 8)
    _chunk(s, 8)
    s.drop_output("flush")  # the last 11 frames never go out
    items = _drain(port)
    assert len(items) == 1 and isinstance(items[0], SegmentEnd)
    assert (items[0].frames, items[0].status, items[0].pts) == (5, "interrupted", 5 * 5625)


async def test_chained_segments_each_count_only_their_own_frames() -> None:
    s = make_session(mode="director")
    port = connect(s, "raw")
    s.start_segment(re=1, seconds=1.0)
    for n in (5, 8, 8):
        _chunk(s, n)
    s.start_segment(re=2, seconds=0.5)  # begun before the first one's frames went out
    _chunk(s, 8)
    ends = [i for i in _drain(port) if isinstance(i, SegmentEnd)]
    assert [(e.segment, e.re, e.frames, e.pts) for e in ends] == [(1, 1, 16, 16 * 5625), (2, 2, 8, 24 * 5625)]
