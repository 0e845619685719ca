"""Admission of spectators: they take no GPU share, but their packing and sending take CPU.

The model: the CPU spectators take = the shared packers' work (measured: thread CPU seconds of
every shared pack, averaged over the last `window_s`) + `each` cores per spectator (sending its
bytes; the configured figure, measured by `python -m loadtest.spectators`). A connect is refused
(`capacity`, reason `spectators`) when one more spectator would take the total past `cpu_cores`,
saying how many this machine serves in all. Connects are also limited per session (a token
bucket: `connects_per_s`, burst twice that): a flood of connects gets `rate_limited` and leaves
the session and its owner alone. Plain data and arithmetic; the WebSocket route asks `admit`.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from protocols.errors import ErrorCode, ProtocolError, Refused

__all__ = ["SpectatorAdmission", "SpectatorBudget"]


@dataclass(frozen=True)
class SpectatorBudget:
    cpu_cores: float = 1.0
    each: float = 0.005
    connects_per_s: float = 20.0
    window_s: float = 5.0


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class SpectatorAdmission:
    budget: SpectatorBudget = field(default_factory=SpectatorBudget)
    clock: Callable[[], float] = time.monotonic
    _packs: deque[tuple[float, float]] = field(default_factory=deque)  # (when, cpu seconds)
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def record_pack(self, cpu_s: float) -> None:
        """One shared pack's thread CPU time (any session, any media mode)."""
        now = self.clock()
        self._packs.append((now, cpu_s))
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self._packs and self._packs[0][0] < now - self.budget.window_s:
            self._packs.popleft()

    def shared_cores(self) -> float:
        """Cores the shared packers took over the last window."""
        self._trim(self.clock())
        return sum(cpu for _, cpu in self._packs) / self.budget.window_s

    def serves(self) -> int:
        """Spectators this machine serves in all at the shared packing measured now."""
        room = self.budget.cpu_cores - self.shared_cores()
        return max(0, math.floor(room / self.budget.each + 1e-9))

    def describe(self, spectators: int) -> dict[str, float | int]:
        return {"spectators": spectators, "serves": self.serves(), "cpu_cores": self.budget.cpu_cores,
                "shared_cores": round(self.shared_cores(), 4), "each_cores": self.budget.each}

    def admit(self, session_id: str, spectators: int) -> None:
        """Raise rate_limited (this session's connects come too fast) or capacity (the CPU bound)."""
        self._take(session_id)
        serves = self.serves()
        if spectators + 1 > serves:
            raise Refused(ErrorCode.CAPACITY, f"this machine serves {serves} spectators in all (their packing and "
                          f"sending may take {self.budget.cpu_cores:g} CPU cores; {spectators} watch now); "
                          "retry when one leaves", 5.0, "spectators")

    def _take(self, session_id: str) -> None:
        now = self.clock()
        rate = self.budget.connects_per_s
        if len(self._buckets) > 4096:  # forget sessions whose buckets are full again
            self._buckets = {k: b for k, b in self._buckets.items() if now - b.at < 2.0}  # a bucket refills in 2 s
        bucket = self._buckets.get(session_id)
        if bucket is None:
            bucket = self._buckets[session_id] = _Bucket(2 * rate, now)
        bucket.tokens = min(2 * rate, bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.tokens < 1:
            raise ProtocolError(ErrorCode.RATE_LIMITED, f"spectators of this session connect faster than "
                                f"{rate:g} a second; retry in a moment")
        bucket.tokens -= 1
