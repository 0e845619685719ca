"""The store contract: the memory store and the Redis store (a real redis-server) behave the same."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sessiond.errors import StoreUnavailable
from sessiond.store import MemoryStore, SessionRecord, StoredEvent
from sessiond.store.redis_store import RedisStore
from tests.conftest import RedisServer, find_free_port


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """Each contract test runs against both stores; the Redis one talks to a redis-server of its own."""
    if request.param == "memory":
        memory = MemoryStore()
        yield memory
        await memory.close()
        return
    server = RedisServer(find_free_port())
    await asyncio.to_thread(server.start)
    redis_store = RedisStore(server.url)
    try:
        yield redis_store
    finally:
        await redis_store.close()
        await asyncio.to_thread(server.stop)


def _record(sid: str = "s_1", **kw: Any) -> SessionRecord:
    base = dict(session_id=sid, mode="director", model="tiny", seed=7, prompt="a lake", width=32, height=32, fps=16,
                token_hash="ab" * 32, created_at=100.0, last_active_at=101.0)
    base.update(kw)
    return SessionRecord(**base)  # type: ignore[arg-type]


async def test_a_record_round_trips_exactly(store: Any) -> None:
    rec = _record(frames_sent=45, segment=2, state="idle", action_space={"keys": ["w"], "mouse": True})
    await store.put_session(rec)
    assert await store.get_session("s_1") == rec


async def test_an_unknown_session_is_none(store: Any) -> None:
    assert await store.get_session("s_missing") is None
    assert await store.get_snapshot("s_missing") is None


async def test_the_directory_lists_sessions_and_forgets_deleted_ones(store: Any) -> None:
    for sid in ("s_b", "s_a", "s_c"):
        await store.put_session(_record(sid))
    await store.put_snapshot("s_b", b"latents")
    await store.delete_session("s_b")
    assert await store.list_sessions() == ["s_a", "s_c"]
    assert await store.get_session("s_b") is None
    assert await store.get_snapshot("s_b") is None


async def test_a_later_put_replaces_the_record(store: Any) -> None:
    await store.put_session(_record(frames_sent=1))
    await store.put_session(_record(frames_sent=99, segment=4))
    got = await store.get_session("s_1")
    assert (got.frames_sent, got.segment) == (99, 4)
    assert await store.list_sessions() == ["s_1"]


async def test_a_position_is_kept_replaced_and_deleted_with_its_session(store: Any) -> None:
    assert await store.get_position("s_1") is None
    await store.put_session(_record())
    await store.put_position("s_1", 48)
    await store.put_position("s_1", 40)  # the latest write wins (a clean stop settles below the mark)
    assert await store.get_position("s_1") == 40
    await store.delete_session("s_1")
    assert await store.get_position("s_1") is None


async def test_a_position_write_after_the_delete_writes_nothing(store: Any) -> None:
    # a write the client gave up on (a timeout) may reach the server after the close's delete
    await store.put_session(_record())
    await store.put_position("s_1", 48)
    await store.delete_session("s_1")
    await store.put_position("s_1", 52)
    assert await store.get_position("s_1") is None
    assert await store.list_sessions() == []
    await store.put_position("s_never", 4)  # nor for a session that never had a record
    assert await store.get_position("s_never") is None


async def test_snapshots_are_bytes_exactly(store: Any) -> None:
    blob = bytes(range(256)) * 1000
    await store.put_snapshot("s_1", blob)
    assert await store.get_snapshot("s_1") == blob


async def test_events_come_back_in_order_per_session_and_all(store: Any) -> None:
    events = [StoredEvent(t=float(i), session_id=f"s_{i % 2}", ev="action", fields={"seq": i, "keys": ["w"]})
              for i in range(1200)]  # more than one page of the Redis reader
    await store.append_events(events[:700])
    await store.append_events(events[700:])
    everything = [e async for e in store.iter_events()]
    odd = [e async for e in store.iter_events("s_1")]
    assert everything == events
    assert odd == [e for e in events if e.session_id == "s_1"]
    assert odd[0].to_json() == {"t": 1.0, "s": "s_1", "ev": "action", "seq": 1, "keys": ["w"]}


def test_a_record_never_holds_a_token() -> None:
    assert "token" not in _record().to_json()


async def test_an_unreachable_redis_raises_store_unavailable() -> None:
    store = RedisStore(f"redis://127.0.0.1:{find_free_port()}/0", timeout_s=0.5)
    try:
        assert await store.ping() is False
        with pytest.raises(StoreUnavailable, match="unreachable"):
            await store.put_session(_record())
        with pytest.raises(StoreUnavailable):
            _ = [e async for e in store.iter_events()]
    finally:
        await store.close()
