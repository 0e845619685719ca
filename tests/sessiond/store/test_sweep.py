"""Start-up sweep of stale stored sessions."""

from __future__ import annotations

import time

from sessiond.store import MemoryStore, SessionRecord
from sessiond.store.sweep import sweep_stale
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
