"""A segment's start delay: planned by admission's cost model when there is one (what is left of
it goes out in `segment_start.start_after_ms`), else from the generation rate observed so far;
the segment's frames are due at their playback times."""

from __future__ import annotations

import time

import numpy as np
import pytest

from engine.api import ChunkFrames
from protocols.messages import SegmentStart
from sessiond.session import connect
from sessiond.session.segments import Segment, observed_start_after
from tests.sessiond._factory import make_env, make_session
from transports.interface import OutChunk


def _start_message(planned: float | None, made_after_s: float) -> SegmentStart:
    session = make_session("s_d", "director", env=make_env(plan_start=lambda sid, seconds, lead_in: planned))
    connect(session, "raw")
    seg = session.start_segment(re=3, seconds=5.0)
    seg.started_at = time.monotonic() - made_after_s  # the first chunk took this long
    job = session.begin_job(0.0, 0.0)
    session.on_frames(job, ChunkFrames(0, np.zeros((8, 4, 4, 3), np.uint8)))
    session.on_job_done(job)
    item = session.out.take()
    assert isinstance(item, SegmentStart) and isinstance(session.out.take(), OutChunk)
    return item


def test_the_planned_delay_sets_the_deadlines_and_what_is_left_is_advised() -> None:
    session = make_session("s_d", "director", env=make_env(plan_start=lambda sid, seconds, lead_in: 1.25))
    connect(session, "raw")
    seg = session.start_segment(re=1, seconds=5.0)
    assert (seg.delay_s, seg.planned) == (1.25, True)
    seg.frames_generated = 16  # one media second made: frame 16 plays at start + 1.25 + 1
    deadline, _ = session.demand(time.monotonic())
    assert deadline == pytest.approx(seg.started_at + 2.25)
    message = _start_message(1.25, made_after_s=0.5)
    assert message.start_after_ms is not None and 740 <= message.start_after_ms <= 750
    assert _start_message(1.25, made_after_s=2.0).start_after_ms == 0  # late already: play at once


def test_without_a_model_the_director_ttff_is_the_plan_and_the_observed_rate_advises() -> None:
    session = make_session("s_d", "director")
    seg = session.start_segment(re=1, seconds=5.0)
    assert (seg.delay_s, seg.planned) == (1.0, False)
    # half a second of media (8 frames at 16 fps) made in 1 s: rate 0.5; the last chunk (at 4.5 s)
    # is ready 4.5 / 0.5 = 9 s from now and plays at a + 4.5: a = 4.5 (+ 0.1 jitter)
    message = _start_message(None, made_after_s=1.0)
    # the test's own run time adds to the 1 s the chunk took, and the advice scales it by the
    # segment's length over the media made (about 9x): 6 ms of a loaded box add up to ~55 ms
    assert message.start_after_ms is not None and 4599 <= message.start_after_ms <= 4660


def test_the_observed_advice_at_or_above_real_time_covers_the_next_chunk() -> None:
    seg = Segment(id=1, re=None, frames_target=80, started_at=0.0, frames_generated=8)
    # 0.5 s made in 0.25 s: rate 2; the next chunk is ready in 0.25 s but plays at 0.5 s: no wait
    assert observed_start_after(seg, 0.25, fps=16, chunk_frames=8, jitter_s=0.1) == pytest.approx(0.1)
    seg.frames_generated = 80
    assert observed_start_after(seg, 0.25, fps=16, chunk_frames=8, jitter_s=0.1) == 0.1
