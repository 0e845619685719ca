"""A recorded trace (`serve --record`) has each `create` and `close` at the time it was asked, even when
the engine opens or frees the session's state a while later (behind a step in flight on a busy
engine): a replay of the recording creates and closes when the user did."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from sessiond.traces import load_trace
from tests.conftest import running_daemon


class _Held:
    """Wraps one of the engine host's calls so it waits until released, as behind a step in flight
    on a busy engine; `began()` is the wall clock read once the call has begun waiting."""

    def __init__(self, host: Any, name: str) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        call = getattr(host, name)

        async def held(*args: Any, **kwargs: Any) -> Any:
            self.entered.set()
            await asyncio.to_thread(self.release.wait, 30)
            return await call(*args, **kwargs)

        setattr(host, name, held)

    def began(self) -> float:
        assert self.entered.wait(30)
        return time.time()


def _in_thread(request: Callable[[], httpx.Response], out: dict[str, Any]) -> threading.Thread:
    thread = threading.Thread(target=lambda: out.update(response=request()))
    thread.start()
    return thread


def _recorded_at(path: Path, index: int) -> float:
    recorded = load_trace(path)
    assert recorded.header.recorded_at is not None
    return datetime.fromisoformat(recorded.header.recorded_at).timestamp() + recorded.events[index].t


def test_the_recorded_close_is_when_the_delete_came_not_when_the_engine_freed_the_session(tmp_path: Path) -> None:
    path = tmp_path / "recorded.jsonl"
    with running_daemon(record=str(path)) as d:
        held = _Held(d.daemon.host, "close")
        created = httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"}).json()
        out: dict[str, Any] = {}
        asked = time.time()
        deleting = _in_thread(lambda: httpx.delete(f"{d.url}/v1/sessions/{created['session_id']}", timeout=60,
                                                   headers={"Authorization": f"Bearer {created['token']}"}), out)
        freed = held.began()  # the close was asked before the engine's free began
        held.release.set()
        deleting.join(60)
        assert out["response"].status_code == 204
    assert [e.ev for e in load_trace(path).events] == ["create", "close"]
    assert asked - 1e-3 <= _recorded_at(path, 1) < freed  # 1 ms: the recorded times are rounded to the microsecond


def test_the_recorded_create_is_when_the_post_came_not_when_the_engine_opened_the_session(tmp_path: Path) -> None:
    path = tmp_path / "recorded.jsonl"
    with running_daemon(record=str(path)) as d:
        held = _Held(d.daemon.host, "open")
        out: dict[str, Any] = {}
        asked = time.time()
        creating = _in_thread(lambda: httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"}, timeout=60), out)
        opened = held.began()  # the create was asked before the engine's open began
        held.release.set()
        creating.join(60)
        assert out["response"].status_code == 201
        created = out["response"].json()
        httpx.delete(f"{d.url}/v1/sessions/{created['session_id']}",
                     headers={"Authorization": f"Bearer {created['token']}"}).raise_for_status()
    assert [e.ev for e in load_trace(path).events] == ["create", "close"]
    assert asked - 1e-3 <= _recorded_at(path, 0) < opened  # 1 ms: the recorded times are rounded to the microsecond
