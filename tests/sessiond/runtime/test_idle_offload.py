"""When an idle session's KV goes to host memory: at once where an offload is cheap; where it is
dear (an offload blocks the engine: 3.3 s on the H200), only when the pool is short of one
session's room, the longest idle first, one a tick."""

from __future__ import annotations

from engine.api import KVStats
from sessiond.admission.decision import OverrunAction
from sessiond.metrics import Metrics
from sessiond.runtime.engine_host import EngineHost
from sessiond.runtime.idle_offload import CHEAP_OFFLOAD_S, IdleOffload
from sessiond.runtime.scheduler import Scheduler
from sessiond.session import EngineOp, Op
from sessiond.session.lifecycle import SessionState
from sessiond.session.overruns import apply_overruns
from tests.sessiond._factory import make_env, make_session
from tests.sessiond._fake_engine import FakeEngine

SESSION_BYTES = 4 * 1000  # one session: 4 slabs of 1,000 bytes


def _kv(free: int) -> KVStats:
    return KVStats(slab_bytes=1000, slabs_total=16, slabs_free=free, slabs_in_use=16 - free, slabs_offloaded=0,
                   bytes_in_use=(16 - free) * 1000, bytes_offloaded=0, per_session={})


def _rule(offload_s: float | None) -> IdleOffload:
    return IdleOffload(idle_offload_s=30.0, session_kv_bytes=SESSION_BYTES, offload_s=lambda: offload_s)


def test_a_cheap_or_unmeasured_offload_takes_every_session_idle_long_enough() -> None:
    idle = [(31.0, "a"), (29.0, "b"), (45.0, "c")]
    for seconds in (None, 0.0015, CHEAP_OFFLOAD_S):
        assert _rule(seconds).choose(idle, _kv(free=12)) == ["a", "c"]


def test_a_dear_offload_waits_while_the_pool_holds_one_more_session() -> None:
    rule = _rule(3.3)
    idle = [(31.0, "a"), (45.0, "c"), (60.0, "d")]
    assert rule.choose(idle, _kv(free=4)) == []  # 4 free slabs: room for one more session
    assert rule.choose(idle, None) == []  # nothing known of the pool: nothing to make room for
    assert rule.choose(idle, _kv(free=3)) == ["d"]  # short: the longest idle, one a tick
    assert rule.choose([(29.0, "b")], _kv(free=0)) == []  # none idle for idle_offload_s yet


def _scheduler(sessions: dict[str, object], offload_s: float | None) -> Scheduler:
    return Scheduler(EngineHost(FakeEngine()), sessions, max_batch=8, metrics=Metrics(),  # type: ignore[arg-type]
                     idle_offload_s=5, idle_close_s=20, on_snapshot=lambda sid, d: None,
                     on_close=lambda sid, why: None, session_kv_bytes=SESSION_BYTES, offload_cost=lambda: offload_s)


def test_the_scheduler_keeps_an_idle_session_resident_while_its_offload_is_dear_and_the_pool_has_room() -> None:
    a, b = make_session("s_a", env=make_env()), make_session("s_b", env=make_env())
    for session in (a, b):
        session.set_state(SessionState.IDLE)
    b.idle_since = a.idle_since + 2  # a has been idle longer
    sched = _scheduler({"s_a": a, "s_b": b}, offload_s=3.3)
    sched.kv = _kv(free=8)
    sched._check_idle(a.idle_since + 10)
    assert (a.state.label, b.state.label, a.ops, b.ops) == ("idle", "idle", [], [])
    sched.kv = _kv(free=2)  # an admission took the room
    sched._check_idle(a.idle_since + 10.5)
    assert (a.state.label, b.state.label, a.ops, b.ops) == ("offloaded", "idle", [EngineOp(Op.OFFLOAD)], [])


async def test_the_scheduler_falls_back_to_the_offload_it_measured_itself() -> None:
    a, b = make_session("s_a", env=make_env()), make_session("s_b", env=make_env())
    engine = FakeEngine()
    sched = Scheduler(EngineHost(engine), {"s_a": a, "s_b": b}, max_batch=8, metrics=Metrics(), idle_offload_s=5,
                      idle_close_s=20, on_snapshot=lambda sid, d: None, on_close=lambda sid, why: None,
                      session_kv_bytes=SESSION_BYTES)  # no cost model
    sched.host.start()
    try:
        b.set_state(SessionState.IDLE)
        assert sched.offload_seconds() is None and sched.idle_offload.cheap()  # unknown: the first one measures
        assert b.offload()
        await sched._run_ops()  # a round of offloads alone: its time per offload is recorded
        assert engine.calls == [("offload", "s_b")]
        measured = sched.offload_seconds()
        assert measured is not None and 0 < measured < 1
    finally:
        await sched.host.stop()
    sched._offload_measured = 0.25  # as dear as the H100's
    assert sched.offload_seconds() == 0.25 and not sched.idle_offload.cheap()
    a.set_state(SessionState.IDLE)
    sched.kv = _kv(free=8)
    sched._check_idle(a.idle_since + 6)
    assert a.state.label == "idle"


def test_admissions_offload_answer_to_overload_is_skipped_where_an_offload_is_dear() -> None:
    a = make_session("s_a", env=make_env())
    a.set_state(SessionState.IDLE)
    actions = [OverrunAction("s_a", "offload_idle", 0.2, 0.3)]
    apply_overruns({"s_a": a}, actions, offload=False)
    assert (a.state.label, a.ops) == ("idle", [])
    apply_overruns({"s_a": a}, actions, offload=True)
    assert (a.state.label, a.ops) == ("offloaded", [EngineOp(Op.OFFLOAD)])
