"""Admission of spectators: they take no GPU share, but their packing and sending take CPU.

The model: the CPU spectators take = the shared packers' work (measured: thread CPU seconds of
every shared pack, averaged over the last `window_s`) + `each` cores per spectator (sending its
bytes). `each` is measured live too: the event loop's thread CPU of every send to a spectator's
socket that completed without waiting (`transports.spectator`), summed over the last `window_s`
whole seconds and divided by the spectator-seconds in them during which a spectator was sent
something (a spectator of a paused session costs nothing and dilutes nothing). Until `min_sends`
sends are in the window the configured `each` stands (the prior, from `python -m
loadtest.spectators`); after, admission takes max(measured, `each_floor`). The floor is a
spectator's whole cost measured once with small frames (loadtest.spectators: 0.0015 cores with the
demo model's 49 KiB frames, of which the send measured here is 0.0002-0.0003): the send's CPU does
not show the rest (queueing it the shared bytes, waking its writer, the framework's bookkeeping),
so the measure raises the figure only where sends are costlier than that (large raw frames),
and never lets a near-zero measure (tiny frames) promise thousands. A connect is refused (`capacity`, reason
`spectators`) when one more spectator would take the total past `cpu_cores`, saying how many this
machine serves in all. Connects are also limited per session (a token
bucket: `connects_per_s`, burst twice that): a flood of connects gets `rate_limited` and leaves
the session and its owner alone. Plain data and arithmetic; the WebSocket route asks `admit`.
"""

from __future__ import annotations

import functools
import itertools
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
    each: float = 0.005  # the prior: cores per spectator until enough sends are measured
    connects_per_s: float = 20.0
    window_s: float = 5.0
    each_floor: float = 0.0015  # the least one spectator is taken to cost once measured
    min_sends: int = 100  # sends measured in the window before the measure replaces the prior


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class _Second:
    """One whole second of spectators' sends: their CPU, how many, and who was sent something."""

    second: int
    cpu_s: float = 0.0
    sends: int = 0
    spectators: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class SendCost:
    """The per-spectator cost as admission takes it: `each` cores, `source` measured or prior."""

    each: float
    source: str  # "measured" | "prior"
    measured: float | None  # cores per spectator-second sent to, before the floor; None: too few sends
    sends: int  # sends in the window

@dataclass
class SpectatorAdmission:
    budget: SpectatorBudget = field(default_factory=SpectatorBudget)
    clock: Callable[[], float] = time.monotonic
    _packs: deque[tuple[float, float]] = field(default_factory=deque)  # (when, cpu seconds)
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _seconds: deque[_Second] = field(default_factory=deque)  # spectators' sends, one entry per second
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def send_meter(self) -> Callable[[float], None]:
        """What one spectator connection reports each send's thread CPU seconds to."""
        return functools.partial(self.record_send, next(self._ids))

    def record_send(self, spectator: int, cpu_s: float) -> None:
        """One send to spectator connection `spectator` took `cpu_s` of the event loop's thread."""
        second = math.floor(self.clock())
        if not self._seconds or self._seconds[-1].second != second:
            self._seconds.append(_Second(second))
            while self._seconds[0].second < second - self.budget.window_s:
                self._seconds.popleft()
        entry = self._seconds[-1]
        entry.cpu_s += cpu_s
        entry.sends += 1
        entry.spectators.add(spectator)

    def send_cost(self) -> SendCost:
        """Over the last `window_s` whole seconds (the current one is not over: left out)."""
        now = math.floor(self.clock())
        done = [s for s in self._seconds if now - self.budget.window_s <= s.second < now]
        sends = sum(s.sends for s in done)
        spectator_seconds = sum(len(s.spectators) for s in done)
        if sends < self.budget.min_sends or spectator_seconds == 0:
            return SendCost(self.budget.each, "prior", None, sends)
        measured = sum(s.cpu_s for s in done) / spectator_seconds
        return SendCost(max(measured, self.budget.each_floor), "measured", measured, sends)

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
        return max(0, math.floor(room / self.send_cost().each + 1e-9))

    def describe(self, spectators: int) -> dict[str, float | int | str | None]:
        cost = self.send_cost()
        return {"spectators": spectators, "serves": self.serves(), "cpu_cores": self.budget.cpu_cores,
                "shared_cores": round(self.shared_cores(), 4), "each_cores": round(cost.each, 6),
                "each_source": cost.source,
                "each_measured_cores": None if cost.measured is None else round(cost.measured, 6),
                "each_prior_cores": self.budget.each, "each_floor_cores": self.budget.each_floor,
                "sends_measured": cost.sends}

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
