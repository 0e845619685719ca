"""Crash-safe time: the position is durable before a chunk leaves; one slow session's store write
never holds up another's; a store outage lets chunks go unguarded (counted) and is retried."""

from __future__ import annotations

import asyncio

import numpy as np

from sessiond.errors import StoreUnavailable
from sessiond.metrics import Metrics
from sessiond.positions import PositionLedger
from sessiond.session import connect
from sessiond.store import MemoryStore
from tests.sessiond._factory import make_env, make_session


class _GatedStore(MemoryStore):
    """A memory store whose position writes can be held (per session) or fail (the store down)."""

    def __init__(self) -> None:
        super().__init__()
        self.gates: dict[str, asyncio.Event] = {}
        self.down = False
        self.writes: list[tuple[str, int]] = []

    async def put_position(self, session_id: str, frames: int) -> None:
        if self.down:
            raise StoreUnavailable("down for the test")
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
