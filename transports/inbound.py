"""The one inbound policy of every transport (WebSocket and WebRTC data channels alike).

Requests other than `action` and `received` beyond `max_requests_per_s` per connection get a
non-fatal `rate_limited` and are dropped. More than `abuse_errors_per_10s` errors (bad messages,
dropped requests) within ten seconds make the connection abusive: it gets a fatal `rate_limited`
and is closed. Actions are not limited here: every action goes to the session, whose action
timeline merges them and applies the one action rate policy.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocols.messages import Action, Received

__all__ = ["InboundGuard", "InboundLimits"]

_ABUSE_WINDOW_S = 10.0


@dataclass(frozen=True)
class InboundLimits:
    max_requests_per_s: int = 50
    abuse_errors_per_10s: int = 50

    def __post_init__(self) -> None:
        if self.max_requests_per_s < 1:
            raise ValueError(f"max_requests_per_s {self.max_requests_per_s}: must be at least 1")
        if self.abuse_errors_per_10s < 1:
            raise ValueError(f"abuse_errors_per_10s {self.abuse_errors_per_10s}: must be at least 1")


class InboundGuard:
    """One connection's counters under `InboundLimits`."""

    def __init__(self, limits: InboundLimits, now: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._now = now
        self._requests: deque[float] = deque()
        self._errors: deque[float] = deque()

    def over_rate(self, message: Any) -> bool:
        """True when `message` is a request beyond the per-second limit (to be refused)."""
        if isinstance(message, Action | Received):
            return False
        now = self._now()
        while self._requests and now - self._requests[0] >= 1.0:
            self._requests.popleft()
        if len(self._requests) >= self.limits.max_requests_per_s:
            return True
        self._requests.append(now)
        return False

    def error(self) -> bool:
        """Count one error; True when the connection is now abusive (to be closed)."""
        now = self._now()
        self._errors.append(now)
        while self._errors and now - self._errors[0] > _ABUSE_WINDOW_S:
            self._errors.popleft()
        return len(self._errors) > self.limits.abuse_errors_per_10s
