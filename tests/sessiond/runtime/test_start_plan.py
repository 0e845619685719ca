"""What the start plan reads from the open sessions (what each still owes) and the start delay
it gives a new segment beside them; exact values worked out by hand (16 fps, chunks of 8 frames:
0.5 media s; every step 0.25 s)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.api import ChunkFrames
from protocols.messages import Direct
from sessiond.admission.edf_plan import Periodic, PlanChunk
from sessiond.runtime.start_plan import PlanInputs, plan_segment_start, plan_workload
from sessiond.session import Session, connect
from tests.sessiond._factory import make_env, make_session

INPUTS = PlanInputs(step_s=lambda b: 0.25 * b, max_batch=1, frames_per_chunk=8, fps=16, lead_in_frames=3,
                    director_lead_s=10.0, jitter_s=0.1, max_delay_s=60.0)


def _sessions() -> dict[str, Session]:
    a = make_session("a", "director")
    connect(a, "raw")
    seg = a.start_segment(re=1, seconds=2.0)  # 32 frames: 4 chunks, and one of lead-in (its stream's first)
    seg.started_at, seg.delay_s = 100.0, 1.0
    w = make_session("w", "world")
    connect(w, "raw")
    c = make_session("c", "director")
    connect(c, "raw")
    c.begin_job(100.0, 100.0)  # a chunk of the segment its new direction replaces, in progress
    idle = make_session("gone", "director")  # no connection: owes nothing
    idle.start_segment(re=1, seconds=2.0)
    return {"a": a, "w": w, "c": c, "gone": idle}


def test_the_workload_is_what_every_other_session_owes_and_the_directors_own_chunk_in_progress() -> None:
    sessions = _sessions()
    committed, _ = plan_workload(sessions, "c", 100.0, INPUTS)
    assert committed[-1] == PlanChunk("c/leftover", 100.0, 100.0)
    # a's segment starts its stream: its first chunk shows 5 frames, so the others play 3 frames
    # (0.1875 s) sooner than 8 apart, and 32 frames take 5 chunks
    assert [(c.owner, c.release, c.deadline, c.slack) for c in committed[:-1]] == [
        ("a", 91.0, 101.0, 0.1), ("a", 91.3125, 101.3125, 0.1), ("a", 91.8125, 101.8125, 0.1),
        ("a", 92.3125, 102.3125, 0.1), ("a", 92.8125, 102.8125, 0.1)]
    w = sessions["w"]
    w.clock.reanchor(101.0, w.out.total)  # its buffer plays until 101
    assert plan_workload(sessions, "c", 100.0, INPUTS)[1] == [Periodic("w", 101.0, 0.5, 1.0)]


def test_a_world_session_whose_buffer_is_dry_is_due_now_and_then_from_its_next_chunk_on() -> None:
    # it just attached (or starved): its viewer's clock follows the next chunk's arrival, a step of
    # one (0.25 s) from now at the soonest, so the chunk after it is due 0.5 s after that
    sessions = _sessions()
    w = sessions["w"]
    w.clock.reanchor(99.0, w.out.total)
    assert plan_workload(sessions, "c", 100.0, INPUTS)[1] == [Periodic("w", 100.0, 0.5, 1.0, restart_s=0.25)]
    assert [c.deadline for c in Periodic("w", 100.0, 0.5, 1.0, restart_s=0.25).until(101.0)] == [100.0, 100.75, 101.25]


def test_a_new_segment_starts_after_the_chunks_due_before_it_and_its_own_leftover() -> None:
    sessions = _sessions()
    del sessions["w"]
    # c's leftover (done 100.25), a's first (due 101.0, done 100.5), c's first (100.75); c's second
    # must go before a's second (ready by 101.2125) or after it: before makes a's late (101.25), so
    # it is done at 101.25, ready 0.1 s before it plays at d + 0.5: d = 0.85; from then on a's and
    # c's chunks alternate, each on time (a4 done 102.5 for 102.7125, c3 102.25 for 102.25)
    delay = plan_segment_start(sessions, "c", 100.0, 2.0, 0.0, INPUTS)
    assert 0.85 <= delay <= 0.855
    assert plan_segment_start({}, "c", 100.0, 2.0, 0.0, INPUTS) == pytest.approx(0.35)  # alone: a chunk + jitter


def test_a_cut_starts_a_new_stream_so_the_next_segment_plans_a_lead_in_again() -> None:
    # a causal decoder makes fewer frames of a stream's first chunk (tiny: 5 of 8): the plan owes the
    # 3 frames of lead-in for a session's first segment and for the first after a cut (which resets
    # the engine session), not for a re-direction that continues the stream
    asked: list[float] = []
    env = make_env(plan_start=lambda sid, seconds, lead_in: asked.append(lead_in) or 1.0)
    d = make_session("d", "director", env=env)
    connect(d, "raw")
    d.direct(Direct(id=1, prompt="a hill", seconds=1.0))
    assert d.fresh_stream and asked == [0.1875]  # 16 frames and 3 of lead-in: 3 chunks
    assert _owed(d) == 3
    assert d.segment is not None and d.segment.starts_stream  # admission counts such segments
    job = d.begin_job(0.0, 0.0)
    d.on_frames(job, ChunkFrames(0, np.zeros((5, 4, 4, 3), np.uint8)))
    d.on_job_done(job)
    assert not d.fresh_stream
    d.direct(Direct(id=2, prompt="a lake", seconds=1.0))  # continues the stream: no lead-in
    assert asked == [0.1875, 0.0] and _owed(d) == 2
    assert d.segment is not None and not d.segment.starts_stream
    d.direct(Direct(id=3, prompt="a city", seconds=1.0, cut=True))  # a new scene: a new stream
    assert d.fresh_stream and asked == [0.1875, 0.0, 0.1875] and _owed(d) == 3
    assert d.segment is not None and d.segment.starts_stream


def _owed(session: Session) -> int:
    committed, _ = plan_workload({"d": session}, "other", 0.0, INPUTS)
    return len(committed)
