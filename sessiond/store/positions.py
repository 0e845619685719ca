"""Crash-safe time: before a chunk's frames are handed to the transport, the session's timeline
position ("every frame with idx < N may have left") is written to the store and the write is
awaited, so a daemon restarted after a SIGKILL resumes at N or later: pts skip forward over
frames counted but never delivered, never back.

One write per chunk, ordered per session (a lock each): a slow store delays only the session
whose chunk waits on it. Frames re-handed below the durable mark (after an interrupt rewinds the
timeline) need no write.

Store outage, by choice: the sessions go on. The first failed write marks the store down; from
then on chunks leave without waiting (counted in `sessiond_position_unguarded_frames`), the
latest mark of each session is kept, and the store writer's loop retries them; once they are
written the guard is back. A crash during an outage can therefore repeat the pts of at most the
frames sent while the store was down (the record written before the outage is all there is).

Closing: `close` returns once no position write for the session can land any more (it waits for
the one in flight, and later ones for a closed session write nothing), so the store's delete that
follows it leaves no position behind."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sessiond.errors import StoreUnavailable
from sessiond.store.base import Store

__all__ = ["PositionLedger"]

logger = logging.getLogger(__name__)

# closed sessions remembered (oldest forgotten first): a write still waiting for a session's lock
# when it closed finds it here and writes nothing; none waits through thousands of later closes
_CLOSED_KEPT = 4096


class PositionLedger:
    def __init__(self, store: Store, metrics: Any) -> None:
        self.store = store
        self.metrics = metrics
        self.healthy = True
        self._durable: dict[str, int] = {}  # session -> the position the store holds
        self._pending: dict[str, int] = {}  # session -> a position not yet written (store down)
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed: dict[str, None] = {}  # insertion-ordered set of closed sessions

    def durable(self, session_id: str) -> int | None:
        return self._durable.get(session_id)

    async def reserve(self, session_id: str, frames: int) -> None:
        """Make position `frames` durable before frames below it leave (returns at once while the
        store is down, see the module's note)."""
        if session_id in self._closed or frames <= self._durable.get(session_id, -1):
            return
        if not self.healthy:
            self._unguarded(session_id, frames)
            return
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            if session_id in self._closed or frames <= self._durable.get(session_id, -1):
                return
            try:
                await self.store.put_position(session_id, frames)
            except StoreUnavailable as exc:
                self.metrics.store_errors.inc()
                if self.healthy:
                    logger.warning("store unavailable: chunks leave without a durable position until it is "
                                   "back (a crash now may repeat pts): %s", exc)
                self.healthy = False
                self._unguarded(session_id, frames)
                return
            self._durable[session_id] = frames

    def _unguarded(self, session_id: str, frames: int) -> None:
        if session_id in self._closed:
            return
        before = max(self._durable.get(session_id, 0), self._pending.get(session_id, 0))
        self._pending[session_id] = max(before, frames)
        self.metrics.position_unguarded_frames.inc(max(0, frames - before))

    async def settle(self, session_id: str, frames: int) -> None:
        """At a clean stop: the exact position (frames actually sent), so a clean restart neither
        repeats nor skips. Raises StoreUnavailable."""
        if session_id in self._closed:
            return
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            if session_id in self._closed:
                return
            await self.store.put_position(session_id, frames)
            self._durable[session_id] = frames
            self._pending.pop(session_id, None)

    async def retry(self) -> None:
        """Write the marks kept while the store was down; the guard is back once they are all
        written (or, with none kept, once the store answers). Raises StoreUnavailable."""
        if self.healthy:
            return
        if not self._pending and not await self.store.ping():
            raise StoreUnavailable("the store does not answer a ping")
        while self._pending:
            session_id = next(iter(self._pending))
            lock = self._locks.setdefault(session_id, asyncio.Lock())
            async with lock:
                frames = self._pending.get(session_id)
                if frames is None or session_id in self._closed:
                    self._pending.pop(session_id, None)
                    continue
                await self.store.put_position(session_id, frames)
                self._durable[session_id] = max(frames, self._durable.get(session_id, 0))
                self._pending.pop(session_id, None)
        self.healthy = True
        logger.info("store reachable again: chunks wait for their durable position again")

    async def close(self, session_id: str) -> None:
        """The session is closed: from now on no position is written for it, and this returns
        after the write in flight for it (if any) has landed, with its marks forgotten. Delete its
        stored position after this, and the delete is the last word."""
        self._closed[session_id] = None
        while len(self._closed) > _CLOSED_KEPT:
            del self._closed[next(iter(self._closed))]
        lock = self._locks.get(session_id)
        if lock is not None:
            async with lock:  # the write in flight (and any already waiting) see the session closed
                pass
        self.forget(session_id)

    def reopen(self, session_id: str) -> None:
        """A session resumed here after a close whose delete did not reach the store: its
        positions are written again."""
        self._closed.pop(session_id, None)

    def forget(self, session_id: str) -> None:
        self._durable.pop(session_id, None)
        self._pending.pop(session_id, None)
        self._locks.pop(session_id, None)
