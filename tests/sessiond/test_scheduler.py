"""The step scheduler, driven against a small fake engine defined here (the real engine is
exercised end to end in tests/e2e)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from engine.api import ChunkFrames, FrameAction, ItemResult, Phase, StepPlan, StepResult
from sessiond._engine_calls import Entry, run_ops, run_step
from sessiond.engine_worker import EngineWorker
from sessiond.lifecycle import SessionState
from sessiond.metrics import Metrics
from sessiond.scheduler import Scheduler
from sessiond.session.state import EngineOp, MediaItem, Op
from tests.sessiond._factory import make_env, make_session

_PHASES = (Phase.DENOISE, Phase.DENOISE, Phase.DECODE, Phase.CACHE)


class FakeEngine:
    """Chunks of 8 frames in 4 phases; records every plan; `fail_begin` sessions raise."""

    def __init__(self, fail_begin: tuple[str, ...] = (), fail_step: tuple[str, ...] = ()) -> None:
        self.progress: dict[str, int | None] = {}
        self.chunks: dict[str, int] = {}
        self.plans: list[tuple[tuple[str, Phase], ...]] = []
        self.calls: list[tuple[str, str]] = []
        self.fail_begin = fail_begin
        self.fail_step = fail_step
        self.actions: dict[str, list[FrameAction]] = {}

    def begin_chunk(self, sid: str, actions: list[FrameAction]) -> int:
        if sid in self.fail_begin:
            raise RuntimeError("boom")
        self.progress[sid] = 0
        self.actions[sid] = actions
        self.chunks[sid] = self.chunks.get(sid, -1) + 1
        return self.chunks[sid]

    def next_phase(self, sid: str) -> Phase | None:
        p = self.progress.get(sid)
        return None if p is None else _PHASES[p]

    def step(self, plan: StepPlan) -> StepResult:
        if any(i.session_id in self.fail_step for i in plan.items):
            raise RuntimeError("batch boom")
        self.plans.append(tuple((i.session_id, i.phase) for i in plan.items))
        results = []
        for item in plan.items:
            p = self.progress[item.session_id]
            assert p is not None
            chunk = None
            if item.phase == Phase.DECODE:
                chunk = ChunkFrames(self.chunks[item.session_id], np.zeros((8, 4, 4, 3), np.uint8))
            self.progress[item.session_id] = None if p + 1 == len(_PHASES) else p + 1
            results.append(ItemResult(item.session_id, item.phase, self.chunks[item.session_id], chunk=chunk))
        return StepResult(tuple(results), seconds={"denoise": 0.001})

    def rollback(self, sid: str) -> int:
        self.calls.append(("rollback", sid))
        self.progress[sid] = None
        return 0

    def restore(self, sid: str) -> bool:
        self.calls.append(("restore", sid))
        return sid != "s_full"

    def mark_delivered(self, sid: str, chunk_index: int) -> None:
        self.calls.append((f"delivered:{chunk_index}", sid))

    def kv_stats(self) -> Any:
        return None


def _scheduler(engine: FakeEngine, sessions: dict[str, Any], max_batch: int = 8, order: str = "deadline") -> Scheduler:
    return Scheduler(engine, EngineWorker(), sessions, max_batch=max_batch, metrics=Metrics(), idle_offload_s=30,
                     idle_close_s=600, on_snapshot=lambda sid, data: None, on_close=lambda sid, why: None,
                     order=order)


def _attached(sid: str, mode: str = "world", **kw: Any) -> Any:
    session = make_session(sid, mode, **kw)
    session.attach("raw")
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
    sched.worker.start()
    try:
        for _ in range(4):
            await sched.run_round()
    finally:
        await sched.worker.stop()
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
    s = _attached("s_a")
    s.handle(Action(seq=4, ts=0.0, keys=("w",), mouse=(2.0, 1.0)), s.port)

    sched = _scheduler(engine, {"s_a": s})
    sched.worker.start()
    try:
        await sched.run_round()
    finally:
        await sched.worker.stop()
    assert engine.actions["s_a"] == [FrameAction(keys=("w",), mouse=(2.0, 1.0), buttons=0, axes=())]
    assert s.job.sample.action_seq == 4


def test_an_exception_in_one_sessions_begin_fails_only_that_session() -> None:
    engine = FakeEngine(fail_begin=("s_bad",))
    out = run_step(engine, (Entry("s_ok", (FrameAction(),)), Entry("s_bad", (FrameAction(),))))
    by = {o.session_id: o for o in out.outcomes}
    assert by["s_bad"].error == "RuntimeError: boom"
    assert by["s_ok"].error is None and by["s_ok"].result.phase == Phase.DENOISE


def test_a_batch_that_raises_is_retried_item_by_item_to_find_the_culprit() -> None:
    engine = FakeEngine(fail_step=("s_bad",))
    out = run_step(engine, (Entry("s_ok", (FrameAction(),)), Entry("s_bad", (FrameAction(),))))
    by = {o.session_id: o for o in out.outcomes}
    assert by["s_bad"].error == "RuntimeError: batch boom"
    assert by["s_ok"].error is None
    assert engine.plans == [(("s_ok", Phase.DENOISE),)]


def test_ops_run_in_order_and_a_failed_restore_is_reported() -> None:
    engine = FakeEngine()
    out = run_ops(engine, {"s_a": [EngineOp(Op.MARK_DELIVERED, chunk_index=3), EngineOp(Op.ROLLBACK)],
                           "s_full": [EngineOp(Op.RESTORE), EngineOp(Op.ROLLBACK)]})
    assert engine.calls == [("delivered:3", "s_a"), ("rollback", "s_a"), ("restore", "s_full")]
    assert out.restore_failed == ("s_full",) and out.errors == {}


async def test_an_engine_fault_fails_the_session_with_engine_fault() -> None:
    closed: list[tuple[str, str]] = []
    s = _attached("s_bad")
    sched = Scheduler(FakeEngine(fail_begin=("s_bad",)), EngineWorker(), {"s_bad": s}, max_batch=8,
                      metrics=Metrics(), idle_offload_s=30, idle_close_s=600, on_snapshot=lambda sid, d: None,
                      on_close=lambda sid, why: closed.append((sid, why)))

    sched.worker.start()
    try:
        await sched.run_round()
    finally:
        await sched.worker.stop()
    assert s.state.label == "failed" and closed == [("s_bad", "engine_fault")]
    err = s.out.control[-1]
    assert (err.code, err.fatal) == ("engine_fault", True)


def test_idle_sessions_are_offloaded_then_closed() -> None:
    closed: list[str] = []
    s = make_session("s_a", env=make_env())
    s.set_state(SessionState.IDLE)
    sched = Scheduler(FakeEngine(), EngineWorker(), {"s_a": s}, max_batch=8, metrics=Metrics(), idle_offload_s=5,
                      idle_close_s=20, on_snapshot=lambda sid, d: None, on_close=lambda sid, why: closed.append(why))
    sched._check_idle(s.idle_since + 4)
    assert s.state.label == "idle"
    sched._check_idle(s.idle_since + 6)
    assert s.state.label == "offloaded" and s.ops == [EngineOp(Op.OFFLOAD)]
    sched._check_idle(s.idle_since + 21)
    assert closed == ["idle"]
