"""A recorded trace (`serve --record`) has each `create` and `close` at the time it was asked, even when
the engine opens or frees the session's state a while later (behind a step in flight on a busy
engine): a replay of the recording creates and closes when the user did."""

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
    assert [e.ev for e in load_trace(path).events] == ["create", "close"]
    assert asked - 1e-3 <= _recorded_at(path, 1) < freed  # 1 ms: the recorded times are rounded to the microsecond


def _recorded_at(path: Path, index: int) -> float:
    recorded = load_trace(path)
    assert recorded.header.recorded_at is not None
    return datetime.fromisoformat(recorded.header.recorded_at).timestamp() + recorded.events[index].t


def test_the_recorded_create_is_when_the_post_came_not_when_the_engine_opened_the_session(tmp_path: Path) -> None:
    path = tmp_path / "recorded.jsonl"
    entered, release = threading.Event(), threading.Event()
    with running_daemon(record=str(path)) as d:
        host = d.daemon.host
        engine_open = host.open

        async def held_open(session_id: str, **kw: Any) -> Any:  # the engine busy: the open waits its turn
            entered.set()
            await asyncio.to_thread(release.wait, 30)
            return await engine_open(session_id, **kw)

        host.open = held_open
        created: dict[str, Any] = {}
        asked = time.time()
        creating = threading.Thread(target=lambda: created.update(httpx.post(
            f"{d.url}/v1/sessions", json={"mode": "director"}, timeout=60).json()))
        creating.start()
        assert entered.wait(30)
        opened = time.time()  # read after the engine's open began: the create was asked before this
        release.set()
        creating.join(60)
        assert not creating.is_alive() and "session_id" in created
        httpx.delete(f"{d.url}/v1/sessions/{created['session_id']}",
                     headers={"Authorization": f"Bearer {created['token']}"}).raise_for_status()
    assert [e.ev for e in load_trace(path).events] == ["create", "close"]
    assert asked - 1e-3 <= _recorded_at(path, 0) < opened  # 1 ms: the recorded times are rounded to the microsecond
