"""Start-up sweep of stale stored sessions; admission's overrun actions applied to sessions."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sessiond.housekeeping import apply_overruns, sweep_stale
from sessiond.lifecycle import SessionState
from sessiond.session import EngineOp, Op
from sessiond.store import MemoryStore, SessionRecord
from tests.sessiond._factory import make_session


def _record(sid: str, last_active_at: float, state: str = "idle") -> SessionRecord:
    return SessionRecord(session_id=sid, mode="world", model="tiny", seed=0, prompt="", width=4, height=4, fps=16,
                         token_hash="0" * 64, created_at=0.0, last_active_at=last_active_at, state=state)


async def test_stored_sessions_idle_too_long_or_failed_are_forgotten_at_start() -> None:
    store = MemoryStore()
    now = time.time()
    for rec in (_record("s_old", now - 700), _record("s_recent", now - 10), _record("s_failed", now, "failed"),
                _record("s_live", now - 700)):
        await store.put_session(rec)
    live = {"s_live": make_session("s_live")}
    assert await sweep_stale(store, live, idle_close_s=600) == 2
    assert await store.list_sessions() == ["s_live", "s_recent"]


@dataclass(frozen=True)
class _Action:
    session_id: str
    action: str
    duty: float = 0.9
    prior: float = 0.5


def test_overrun_actions_cut_the_lead_and_offload_idle_state() -> None:
    world = make_session("s_w")
    world.attach("raw")
    idle = make_session("s_i")
    idle.set_state(SessionState.IDLE)
    apply_overruns({"s_w": world, "s_i": idle},
                   [_Action("s_w", "degrade_lead"), _Action("s_i", "offload_idle"), _Action("s_gone", "degrade_lead")])
    assert world.lead_override == 1.0
    assert idle.state == SessionState.OFFLOADED and idle.ops == [EngineOp(Op.OFFLOAD)]


def test_a_degraded_lead_comes_back_once_admission_no_longer_names_the_session() -> None:
    world = make_session("s_w")
    world.attach("raw")
    apply_overruns({"s_w": world}, [_Action("s_w", "degrade_lead")])
    assert world.lead_override == 1.0
    apply_overruns({"s_w": world}, [_Action("s_w", "degrade_lead")])
    assert world.lead_override == 1.0
    apply_overruns({"s_w": world}, [])
    assert world.lead_override is None
