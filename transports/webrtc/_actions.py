"""Bounded intake of `action` messages from a peer's data channels.

Actions arrive as fast as a client sends them. Up to `max_per_s` (a token bucket, burst of
`burst`) go to the session at once; beyond that they are coalesced: only the newest waits
for the next token (held keys: latest wins) and every replaced one is counted as dropped and
logged at most once a second. Memory stays one pending action, whatever the flood.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["ActionGate"]

logger = logging.getLogger(__name__)


class ActionGate:
    def __init__(
        self,
        submit: Callable[[Any], Awaitable[None]],
        max_per_s: float,
        burst: int = 8,
        now: Callable[[], float] = time.monotonic,
        label: str = "",
    ) -> None:
        if max_per_s <= 0 or burst < 1:
            raise ValueError(f"action rate {max_per_s}/s, burst {burst}: both must be positive")
        self._submit = submit
        self._rate = max_per_s
        self._burst = float(burst)
        self._tokens = float(burst)
        self._now = now
        self._stamp = now()
        self._pending: Any = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._label = label
        self.accepted = 0
        self.dropped = 0
        self._logged_at = 0.0

    def _refill(self) -> None:
        now = self._now()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now

    def offer(self, action: Any) -> None:
        """Take one decoded action (called from the data channel's message handler)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        if self._pending is not None:
            self.dropped += 1
            self._log_drops()
        self._pending = action
        self._wake.set()

    def _log_drops(self) -> None:
        now = self._now()
        if now - self._logged_at >= 1.0:
            logger.warning(
                "webrtc %s: action flood, %d actions coalesced (dropped) so far", self._label, self.dropped
            )
            self._logged_at = now

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending is not None:
                self._refill()
                if self._tokens < 1.0:
                    await asyncio.sleep((1.0 - self._tokens) / self._rate)
                    continue
                self._tokens -= 1.0
                action, self._pending = self._pending, None
                self.accepted += 1
                await self._submit(action)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
