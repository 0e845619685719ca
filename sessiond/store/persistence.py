"""Background writers to the store: the event log (batched appends) and durable session records
(latest state wins, coalesced). When the store is down they keep a bounded backlog, count the
failures, and retry; the sessions never wait on these writes (the one write a session waits for
is its timeline position before a chunk leaves: `sessiond.store.positions`, whose marks kept during an
outage are retried here)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from sessiond.errors import StoreUnavailable
from sessiond.store.base import SessionRecord, Store, StoredEvent
from sessiond.store.positions import PositionLedger

__all__ = ["StoreWriter"]

logger = logging.getLogger(__name__)


class StoreWriter:
    def __init__(self, store: Store, metrics: Any, records: Callable[[str], SessionRecord | None], *,
                 interval_s: float = 0.1, max_backlog: int = 100_000, positions: PositionLedger | None = None
                 ) -> None:
        self.store = store
        self.positions = positions  # its marks kept during a store outage are retried here
        self.metrics = metrics
        self._records = records  # session id -> its live record (None once gone)
        self.interval_s = interval_s
        self._events: deque[StoredEvent] = deque(maxlen=max_backlog)
        self._dirty: set[str] = set()
        self._snapshots: dict[str, bytes] = {}
        self._task: asyncio.Task[None] | None = None
        self.healthy = True
        self.events_dropped = 0

    def log(self, session_id: str, ev: str, fields: dict[str, Any], at: float | None = None) -> None:
        """One event of the log, at `at` (wall clock, when it was asked for) or now."""
        if len(self._events) == self._events.maxlen:
            self.events_dropped += 1
        self._events.append(StoredEvent(t=time.time() if at is None else at, session_id=session_id, ev=ev,
                                        fields=fields))

    def persist(self, session_id: str) -> None:
        self._dirty.add(session_id)

    def snapshot(self, session_id: str, data: bytes) -> None:
        self._snapshots[session_id] = data

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="sessiond-store-writer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(StoreUnavailable):
            await self.flush()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.flush()
                if not self.healthy:
                    logger.info("store reachable again")
                self.healthy = True
            except StoreUnavailable as exc:
                self.metrics.store_errors.inc()
                if self.healthy:
                    logger.warning("store unavailable; sessions go on, writes are retried: %s", exc)
                self.healthy = False

    async def flush(self) -> None:
        """Write everything pending; on failure the unwritten part stays pending."""
        if self._events:
            batch = list(self._events)
            await self.store.append_events(batch)
            for _ in batch:
                self._events.popleft()
        while self._dirty:
            sid = self._dirty.pop()
            record = self._records(sid)
            if record is None:
                continue
            try:
                await self.store.put_session(SessionRecord.from_json(record.to_json()))
            except StoreUnavailable:
                self._dirty.add(sid)
                raise
        while self._snapshots:
            sid, data = next(iter(self._snapshots.items()))
            if self._records(sid) is not None:
                await self.store.put_snapshot(sid, data)
            self._snapshots.pop(sid, None)
        if self.positions is not None:
            await self.positions.retry()
