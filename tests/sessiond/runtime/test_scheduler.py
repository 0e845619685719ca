"""The step scheduler, driven against a small fake engine defined here (the real engine is
exercised end to end in tests/e2e)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from engine.api import FrameAction, Phase
from sessiond.metrics import Metrics
from sessiond.runtime.engine_host import EngineHost
from sessiond.runtime.scheduler import Scheduler
from sessiond.session import EngineOp, Op, connect
from sessiond.session.lifecycle import SessionState
from sessiond.session.output import MediaItem
from tests.sessiond._factory import make_env, make_session
from tests.sessiond._fake_engine import FakeEngine


def _scheduler(engine: FakeEngine, sessions: dict[str, Any], max_batch: int = 8, order: str = "deadline") -> Scheduler:
    return Scheduler(EngineHost(engine), sessions, max_batch=max_batch, metrics=Metrics(), idle_offload_s=30,
                     idle_close_s=600, on_snapshot=lambda sid, data: None, on_close=lambda sid, why: None,
                     order=order)


def _attached(sid: str, mode: str = "world", **kw: Any) -> Any:
    session = make_session(sid, mode, **kw)
    connect(session, "raw")
    return session


def _buffered(session: Any, frames: int) -> None:
    session.out.push_media(MediaItem(0, 0, np.zeros((frames, 4, 4, 3), np.uint8), 0, -1))


def test_the_most_urgent_world_session_is_picked_first() -> None:
    a, b = _attached("s_a"), _attached("s_b")
    now = time.monotonic()
    _buffered(a, 8)  # half a second ahead of its viewer; b has nothing buffered
    chosen, _ = _scheduler(FakeEngine(), {"s_a": a, "s_b": b}, max_batch=1)._pick(now)
    assert [s.id for s, _, _ in chosen] == ["s_b"]


def test_a_world_session_ahead_by_its_lead_waits_until_start_by() -> None:
    s = _attached("s_a")
    now = time.monotonic()
    _buffered(s, 24)  # 1.5 s buffered > the 2-chunk lead (1 s)
    chosen, next_at = _scheduler(FakeEngine(), {"s_a": s})._pick(now)
    assert chosen == [] and next_at == pytest.approx(s.clock.anchor_t + 0.5, abs=1e-6)


def test_the_world_clock_follows_the_wire_when_playback_starts_late() -> None:
    # the clock is anchored when the connection attaches; a WebRTC handshake then takes 0.75 s
    # before the first frame goes out. The clock follows the wire: 24 frames buffered (1.5 s)
    # against the 2-chunk lead (1 s) wait 0.5 s from the first send, instead of starting at once
    # and staying 0.75 s ahead of the viewer for the rest of the session
    s = _attached("s_a")
    now = time.monotonic()
    s.clock.reanchor(now - 0.75, 0)
    _buffered(s, 24)
    chunk = s.out.take()
    s.on_sent(chunk.frames[0])
    assert s.clock.anchor_i == 0 and s.clock.anchor_t >= now
    assert s.demand(time.monotonic()) == pytest.approx((s.clock.anchor_t + 1.5, s.clock.anchor_t + 0.5), abs=1e-9)


@pytest.mark.parametrize(("mode", "ago"), [
    ("world", 0.03),  # half a frame ago: the first frame goes out on time
    ("director", 0.75),  # a director's chunks keep their segment's own deadlines, however late the wire
])
def test_a_send_the_clock_expected_or_a_directors_leaves_the_clock_alone(mode: str, ago: float) -> None:
    s = _attached("s_a", mode)
    anchored = time.monotonic() - ago
    s.clock.reanchor(anchored, 0)
    _buffered(s, 8)
    s.on_sent(s.out.take().frames[0])
    assert (s.clock.anchor_t, s.clock.anchor_i) == (anchored, 0)


def test_a_long_director_segment_does_not_starve_a_world_deadline() -> None:
    director = _attached("s_dir", "director")
    director.start_segment(re=1, seconds=60.0)
    world = _attached("s_world")
    now = time.monotonic()
    world.clock.reanchor(now - 0.1, 0)
    sched = _scheduler(FakeEngine(), {"s_dir": director, "s_world": world}, max_batch=1)
    chosen, _ = sched._pick(now)
    assert chosen[0][0].id == "s_world"  # the world's buffer is dry now; the segment's first frame may take 1 s


def test_a_new_short_segment_goes_before_a_long_one_already_running() -> None:
    long_ = _attached("s_long", "director")
    long_.start_segment(re=1, seconds=60.0)
    long_.segment.frames_generated = 48  # three seconds of media already generated
    long_.segment.started_at -= 0.5
    short = _attached("s_short", "director")
    short.start_segment(re=2, seconds=1.0)
    chosen, _ = _scheduler(FakeEngine(), {"s_long": long_, "s_short": short}, max_batch=1)._pick(time.monotonic())
    assert chosen[0][0].id == "s_short"


def test_request_level_fifo_serves_the_earlier_segment_before_a_later_short_one() -> None:
    long_ = _attached("s_long", "director")
    long_.start_segment(re=1, seconds=60.0)
    long_.segment.frames_generated = 48
    long_.segment.started_at -= 0.5
    short = _attached("s_short", "director")
    short.start_segment(re=2, seconds=1.0)
    sched = _scheduler(FakeEngine(), {"s_short": short, "s_long": long_}, max_batch=1, order="fifo")
    chosen, _ = sched._pick(time.monotonic())
    assert chosen[0][0].id == "s_long" and chosen[0][1].arrival == long_.segment.started_at


def test_request_level_fifo_keeps_a_begun_chunk_in_its_requests_place() -> None:
    early = _attached("s_early", "director")
    early.start_segment(re=1, seconds=5.0)
    early.segment.started_at -= 2.0
    late = _attached("s_late", "director")
    late.start_segment(re=2, seconds=5.0)
    sched = _scheduler(FakeEngine(), {"s_late": late, "s_early": early}, max_batch=1, order="fifo")
    now = time.monotonic()
    late.begin_job(now, now - 100.0, arrival=late.segment.started_at)  # in flight, urgent, but asked later
    chosen, _ = sched._pick(now)
    assert [c[0].id for c in chosen] == ["s_early"]
    deadline_first, _ = _scheduler(FakeEngine(), {"s_late": late, "s_early": early}, max_batch=1)._pick(now)
    assert [c[0].id for c in deadline_first] == ["s_late"]


async def test_compatible_items_are_batched_into_one_step() -> None:
    engine = FakeEngine()
    sessions = {f"s_{i}": _attached(f"s_{i}") for i in range(3)}

    sched = _scheduler(engine, sessions)
    sched.host.start()
    try:
        for _ in range(4):
            await sched.run_round()
    finally:
        await sched.host.stop()
    assert engine.plans[0] == (("s_0", Phase.DENOISE), ("s_1", Phase.DENOISE), ("s_2", Phase.DENOISE))
    assert all(len(p) == 3 for p in engine.plans[:4])
    assert all(s.out.media_frames == 8 and s.chunks_done == 1 for s in sessions.values())


def test_a_session_with_pending_ops_is_not_stepped_in_the_same_round() -> None:
    s = _attached("s_a")
    s.ops.append(EngineOp(Op.ROLLBACK))
    chosen, _ = _scheduler(FakeEngine(), {"s_a": s})._pick(time.monotonic())
    assert chosen == []


async def test_conditioning_is_the_action_state_sampled_at_the_chunk_boundary() -> None:
    from protocols.messages import Action

    engine = FakeEngine()
    s = make_session("s_a")
    connect(s, "raw").submit(Action(seq=4, ts=0.0, keys=("w",), mouse=(2.0, 1.0)))

    sched = _scheduler(engine, {"s_a": s})
    sched.host.start()
    try:
        await sched.run_round()
    finally:
        await sched.host.stop()
    assert engine.actions["s_a"] == [FrameAction(keys=("w",), mouse=(2.0, 1.0), buttons=0, axes=())]
    assert s.job.action_seq == 4


async def test_an_engine_fault_fails_the_session_with_engine_fault() -> None:
    closed: list[tuple[str, str]] = []
    s = _attached("s_bad")
    sched = Scheduler(EngineHost(FakeEngine(fail_begin=("s_bad",))), {"s_bad": s}, max_batch=8,
                      metrics=Metrics(), idle_offload_s=30, idle_close_s=600, on_snapshot=lambda sid, d: None,
                      on_close=lambda sid, why: closed.append((sid, why)))

    sched.host.start()
    try:
        await sched.run_round()
    finally:
        await sched.host.stop()
    assert s.state.label == "failed" and closed == [("s_bad", "engine_fault")]
    err = s.out.control[-1]
    assert (err.code, err.fatal) == ("engine_fault", True)


def test_idle_sessions_are_offloaded_then_closed() -> None:
    closed: list[str] = []
    s = make_session("s_a", env=make_env())
    s.set_state(SessionState.IDLE)
    sched = Scheduler(EngineHost(FakeEngine()), {"s_a": s}, max_batch=8, metrics=Metrics(), idle_offload_s=5,
                      idle_close_s=20, on_snapshot=lambda sid, d: None, on_close=lambda sid, why: closed.append(why))
    sched._check_idle(s.idle_since + 4)
    assert s.state.label == "idle"
    sched._check_idle(s.idle_since + 6)
    assert s.state.label == "offloaded" and s.ops == [EngineOp(Op.OFFLOAD)]
    sched._check_idle(s.idle_since + 21)
    assert closed == ["idle"]


def test_edf_orders_world_and_director_chunks_by_their_playback_deadlines() -> None:
    # deadlines, all playback times: a director planned to start 0.2 s after its `direct` (0.2 s),
    # a world viewer dry in 0.5 s (8 frames at 16 fps), a director planned at 1.2 s with 2 s of
    # media already made (3.2 s), a world viewer dry in 1.0 s
    now = time.monotonic()
    soon = _attached("s_soon", "director", env=make_env(plan_start=lambda sid, seconds, lead_in: 0.2))
    later = _attached("s_later", "director", env=make_env(plan_start=lambda sid, seconds, lead_in: 1.2))
    w_half, w_one = _attached("s_w05"), _attached("s_w10")
    soon.start_segment(re=1, seconds=5.0)
    later.start_segment(re=2, seconds=5.0)
    later.segment.frames_generated = 32
    for world, frames in ((w_half, 8), (w_one, 16)):
        world.clock.reanchor(now, 0)
        _buffered(world, frames)
    soon.segment.started_at = later.segment.started_at = now
    sessions = {"s_later": later, "s_w10": w_one, "s_soon": soon, "s_w05": w_half}
    ready = []
    for sid in ("s_soon", "s_w05", "s_w10", "s_later"):
        want = sessions[sid].demand(now + 0.4)  # every one ready to begin, none dry yet
        assert want is not None
        ready.append((sid, want[0]))
    assert [sid for sid, _ in sorted(ready, key=lambda r: r[1])] == ["s_soon", "s_w05", "s_w10", "s_later"]
    assert [round(d - now, 3) for _, d in ready] == [0.2, 0.5, 1.0, 3.2]
    chosen, _ = _scheduler(FakeEngine(), sessions, max_batch=2)._pick(now + 0.4)
    assert [s.id for s, _, _ in chosen] == ["s_soon", "s_w05"]


def test_a_chunk_joins_the_batch_only_where_batching_helps() -> None:
    def sched(cost: Any) -> Scheduler:
        s = _scheduler(FakeEngine(), {}, max_batch=8)
        s.chunk_cost = cost
        return s

    far = [100.0] * 6
    assert sched(lambda b: 0.5 * b).batch_size(0.0, far) == 1  # no gain: one at a time
    assert sched(lambda b: 0.5 + 0.1 * (b - 1)).batch_size(0.0, far) == 6  # a gain: all ready ones
    assert sched(None).batch_size(0.0, far) == 6  # no cost model: as many as max_batch allows
    # with a gain, but the earliest deadline (0.75 s) holds only up to a batch of 3 (0.7 s)
    assert sched(lambda b: 0.5 + 0.1 * (b - 1)).batch_size(0.0, [0.75, *far]) == 3
    # a deadline lost already goes at once: an on-time chunk would only make it later (and its
    # owner's next chunks behind it); chunks lost as well join it, for throughput
    assert sched(lambda b: 0.5 + 0.1 * (b - 1)).batch_size(0.0, [0.2, *far]) == 1
    assert sched(lambda b: 0.5 + 0.1 * (b - 1)).batch_size(0.0, [0.2, 0.3, 0.45, 0.6, *far]) == 3
    # a far chunk does not join where it would make the earliest owner's next chunk late: alone
    # 0.5 + 0.5 <= 1.05, behind a pair 0.6 + 0.5 > 1.05 (its owner has none after: no matter)
    assert sched(lambda b: 0.5 + 0.1 * (b - 1)).batch_size(0.0, [0.75, 100.0], [1.05, None]) == 1
    assert sched(lambda b: 0.5 + 0.1 * (b - 1)).batch_size(0.0, [0.75, 100.0], [1.2, None]) == 2
    assert sched(lambda b: 0.5 + 0.1 * (b - 1)).batch_size(0.0, [0.75, 100.0], [None, None]) == 2


def test_a_chunks_successor_is_due_a_chunk_later_and_a_segments_last_chunk_has_none() -> None:
    # the scheduler's batching looks one chunk ahead of each owner (`Session.following_deadline`)
    director = _attached("s_d", "director", env=make_env(plan_start=lambda sid, seconds, lead_in: 0.2))
    world = _attached("s_w")
    chunk_s = director.env.frames_per_chunk / director.record.fps
    director.start_segment(re=1, seconds=5.0)
    seg = director.segment
    assert world.following_deadline(10.0) == pytest.approx(10.0 + chunk_s)
    seg.frames_generated = seg.frames_target - 2 * director.env.frames_per_chunk
    assert director.following_deadline(10.0) == pytest.approx(10.0 + chunk_s)
    seg.frames_generated = seg.frames_target - director.env.frames_per_chunk  # the chunk due at 10 s ends it
    assert director.following_deadline(10.0) is None
