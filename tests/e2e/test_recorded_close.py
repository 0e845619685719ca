"""A recorded trace (`serve --record`) has each `close` at the time the close was asked, even when the
engine frees the session's state a while later (behind a step in flight on a busy engine): a replay
of the recording closes when the user did."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from sessiond.traces import load_trace
from tests.conftest import running_daemon


def test_the_recorded_close_is_when_the_delete_came_not_when_the_engine_freed_the_session(tmp_path: Path) -> None:
    path = tmp_path / "recorded.jsonl"
    entered, release = threading.Event(), threading.Event()
    with running_daemon(record=str(path)) as d:
        host = d.daemon.host
        engine_close = host.close

        async def held_close(session_id: str) -> Any:  # the engine busy: the free waits its turn
            entered.set()
            await asyncio.to_thread(release.wait, 30)
            return await engine_close(session_id)

        host.close = held_close
        created = httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"}).json()
        sid, token = created["session_id"], created["token"]
        asked = time.time()
        deleting = threading.Thread(target=lambda: httpx.delete(
            f"{d.url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {token}"}, timeout=60))
        deleting.start()
        assert entered.wait(30)
        freed = time.time()  # read after the engine's free began: the close was asked before this
        release.set()
        deleting.join(60)
        assert not deleting.is_alive()
    recorded = load_trace(path)
    assert [e.ev for e in recorded.events] == ["create", "close"]
    assert recorded.header.recorded_at is not None
    start = datetime.fromisoformat(recorded.header.recorded_at).timestamp()
    closed_at = start + recorded.events[1].t
    assert asked - 1e-3 <= closed_at < freed  # 1 ms: the header's start and `t` are rounded to the microsecond
