"""Crash-safe time: the position is durable before a chunk leaves; one slow session's store write
never holds up another's; a store outage lets chunks go unguarded (counted) and is retried."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from sessiond.errors import StoreUnavailable
from sessiond.metrics import Metrics
from sessiond.session import connect
from sessiond.store import MemoryStore, SessionRecord
from sessiond.store.base import Store
from sessiond.store.positions import PositionLedger
from sessiond.store.redis_store import RedisStore
from tests.conftest import RedisServer
from tests.sessiond._factory import make_env, make_session


def _record(sid: str) -> SessionRecord:
    return SessionRecord(session_id=sid, mode="world", model="tiny", seed=1, prompt="", width=4, height=4, fps=16,
                         token_hash="", created_at=0.0, last_active_at=0.0)


class _GatedStore(MemoryStore):
    """A memory store whose position writes can be held (per session) or fail (the store down). It
    holds the records of the sessions these tests use (a position is only written for a session
    whose record exists)."""

    def __init__(self) -> None:
        super().__init__()
        for sid in ("s_1", "s_2", "s_fast", "s_slow"):
            self._records[sid] = _record(sid).to_json()
        self.gates: dict[str, asyncio.Event] = {}
        self.down = False
        self.writes: list[tuple[str, int]] = []
        self.reached: list[tuple[str, int]] = []  # writes that reached the store (landed or held)

    async def put_position(self, session_id: str, frames: int) -> None:
        if self.down:
            raise StoreUnavailable("down for the test")
        self.reached.append((session_id, frames))
        gate = self.gates.get(session_id)
        if gate is not None:
            await gate.wait()
        self.writes.append((session_id, frames))
        await super().put_position(session_id, frames)

    async def ping(self) -> bool:
        return not self.down


async def test_a_chunk_is_handed_out_only_after_its_position_is_stored() -> None:
    store = _GatedStore()
    ledger = PositionLedger(store, Metrics())
    session = make_session(env=make_env(reserve=ledger.reserve))
    port = connect(session, "raw")
    store.gates["s_1"] = asyncio.Event()
    session.out.push_frames(0, np.zeros((8, 4, 4, 3), np.uint8), 0, -1)
    pending = asyncio.ensure_future(port.next_output())
    await asyncio.sleep(0.05)
    assert not pending.done() and await store.get_position("s_1") is None
    store.gates["s_1"].set()
    chunk = await pending
    assert [f.idx for f in chunk.frames] == list(range(8))
    assert await store.get_position("s_1") == 8


async def test_a_slow_write_holds_only_its_own_session() -> None:
    store = _GatedStore()
    ledger = PositionLedger(store, Metrics())
    store.gates["s_slow"] = asyncio.Event()
    slow = asyncio.ensure_future(ledger.reserve("s_slow", 8))
    await asyncio.wait_for(ledger.reserve("s_fast", 8), 1.0)  # not behind s_slow's write
    assert store.writes == [("s_fast", 8)] and not slow.done()
    store.gates["s_slow"].set()
    await slow
    assert store.writes == [("s_fast", 8), ("s_slow", 8)]


async def test_positions_already_durable_are_not_written_again() -> None:
    store = _GatedStore()
    ledger = PositionLedger(store, Metrics())
    for frames in (8, 16, 12, 16, 24):  # 12 and 16: re-handed after an interrupt rewound the timeline
        await ledger.reserve("s_1", frames)
    assert store.writes == [("s_1", 8), ("s_1", 16), ("s_1", 24)]


async def test_a_store_outage_lets_chunks_go_unguarded_and_is_retried() -> None:
    store = _GatedStore()
    metrics = Metrics()
    ledger = PositionLedger(store, metrics)
    await ledger.reserve("s_1", 8)
    store.down = True
    await ledger.reserve("s_1", 16)  # returns: the session goes on
    assert not ledger.healthy
    store.gates["s_1"] = asyncio.Event()  # a write would now hang: while down, nothing waits on the store
    await asyncio.wait_for(ledger.reserve("s_1", 24), 0.5)
    assert metrics.position_unguarded_frames._value.get() == 16
    assert metrics.store_errors._value.get() == 1
    store.gates["s_1"].set()
    try:
        await ledger.retry()
    except StoreUnavailable:
        pass
    assert not ledger.healthy
    store.down = False
    await ledger.retry()
    assert ledger.healthy and await store.get_position("s_1") == 24
    await ledger.reserve("s_1", 32)
    assert store.writes[-1] == ("s_1", 32)


async def test_settle_writes_the_exact_position_even_below_the_durable_one() -> None:
    store = _GatedStore()
    ledger = PositionLedger(store, Metrics())
    await ledger.reserve("s_1", 24)
    await ledger.settle("s_1", 19)  # a clean stop: 19 frames actually sent
    assert await store.get_position("s_1") == 19


async def _until_waiting(store: _GatedStore, session_id: str) -> None:
    """Until a write of `session_id` has reached the store (and is held at its gate)."""
    for _ in range(100):
        if any(sid == session_id for sid, _ in store.reached):
            return
        await asyncio.sleep(0)
    raise AssertionError(f"no write of {session_id} reached the store")


async def _close_and_delete(ledger: PositionLedger, store: Store, session_id: str) -> None:
    """What the daemon does at a close."""
    await ledger.close(session_id)
    await store.delete_session(session_id)


async def test_a_close_waits_for_the_write_in_flight_so_no_position_outlives_the_session() -> None:
    store = _GatedStore()
    ledger = PositionLedger(store, Metrics())
    store.gates["s_1"] = asyncio.Event()
    writing = asyncio.ensure_future(ledger.reserve("s_1", 8))
    behind = asyncio.ensure_future(ledger.reserve("s_1", 16))  # waits for the lock, behind the first write
    await _until_waiting(store, "s_1")
    closing = asyncio.ensure_future(_close_and_delete(ledger, store, "s_1"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not closing.done()  # the close waits for the write in flight
    store.gates["s_1"].set()
    await asyncio.wait_for(asyncio.gather(writing, behind, closing), 1.0)
    assert store.writes == [("s_1", 8)]  # the write behind it saw the session closed
    assert await store.get_position("s_1") is None
    await ledger.reserve("s_1", 24)  # a late chunk of the closed session writes nothing
    assert store.writes == [("s_1", 8)] and await store.get_position("s_1") is None
    assert ledger.durable("s_1") is None


async def test_a_mark_kept_during_an_outage_is_not_retried_for_a_closed_session() -> None:
    store = _GatedStore()
    ledger = PositionLedger(store, Metrics())
    store.down = True
    await ledger.reserve("s_1", 8)
    await ledger.reserve("s_2", 8)
    store.down = False
    store.gates["s_1"] = asyncio.Event()
    retrying = asyncio.ensure_future(ledger.retry())  # writes s_1's mark first: held at the gate
    await _until_waiting(store, "s_1")
    closing = asyncio.ensure_future(_close_and_delete(ledger, store, "s_1"))
    await _close_and_delete(ledger, store, "s_2")  # s_2's mark is not written at all
    store.gates["s_1"].set()
    await asyncio.wait_for(asyncio.gather(retrying, closing), 1.0)
    assert ledger.healthy and store.writes == [("s_1", 8)]
    assert (await store.get_position("s_1"), await store.get_position("s_2")) == (None, None)


async def test_a_session_resumed_after_its_close_is_written_again() -> None:
    store = _GatedStore()
    ledger = PositionLedger(store, Metrics())
    await ledger.close("s_1")  # its delete did not reach the store, so it can be resumed
    ledger.reopen("s_1")
    await ledger.reserve("s_1", 8)
    assert await store.get_position("s_1") == 8


class _GatedRedisStore(RedisStore):
    """A real Redis store whose position writes wait for `gate` once `reached` is set."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.gate = asyncio.Event()
        self.reached = asyncio.Event()

    async def put_position(self, session_id: str, frames: int) -> None:
        self.reached.set()
        await self.gate.wait()
        await super().put_position(session_id, frames)


@pytest.mark.redis
async def test_on_redis_a_close_leaves_no_position_key_behind_a_write_in_flight(redis_server: RedisServer) -> None:
    store = _GatedRedisStore(redis_server.url)
    try:
        ledger = PositionLedger(store, Metrics())
        await store.put_session(SessionRecord(session_id="s_1", mode="world", model="tiny", seed=1, prompt="",
                                              width=4, height=4, fps=16, token_hash="0" * 64, created_at=0.0,
                                              last_active_at=0.0))
        writing = asyncio.ensure_future(ledger.reserve("s_1", 8))
        await asyncio.wait_for(store.reached.wait(), 1.0)
        closing = asyncio.ensure_future(_close_and_delete(ledger, store, "s_1"))
        await asyncio.sleep(0.05)
        assert not closing.done()
        store.gate.set()
        await asyncio.wait_for(asyncio.gather(writing, closing), 5.0)
        assert await store.get_position("s_1") is None
        assert await store.list_sessions() == []
    finally:
        await store.close()
