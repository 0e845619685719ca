"""Sessions created but never connected: a create holds admission's capacity (a World session its
whole share of the engine), so one that no client connects within `unconnected_close_s` (30 s by
default) is released and counted; a stray `curl -X POST` cannot hold the machine.

A session counts as connected once a connection is attached (or it has ever sent a frame, e.g. a
session resumed from the store). Its bound runs from its creation; a session this daemon first
sees later than that (resumed after a restart) gets the bound from when it was first seen."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConnectWatch"]

_SEEN_LATE_S = 1.0  # first seen this long after its creation: resumed, not created here


@dataclass
class ConnectWatch:
    bound_s: float  # seconds from creation a session may stay unconnected
    clock: Callable[[], float] = time.time
    _deadline: dict[str, float] = field(default_factory=dict)  # session id -> when it is released, unless connected
    _connected: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.bound_s <= 0:
            raise ValueError(f"unconnected_close_s must be > 0 seconds, got {self.bound_s}")

    def expired(self, sessions: Mapping[str, Any]) -> list[str]:
        """Ids of live sessions past their bound with no connection ever: the caller releases them."""
        now = self.clock()
        for gone in [sid for sid in self._deadline if sid not in sessions]:
            del self._deadline[gone]
        self._connected &= sessions.keys()
        out = []
        for sid, session in list(sessions.items()):
            if sid in self._connected or session.state.terminal:
                continue
            if session.connection is not None or session.out.sent > 0:
                self._connected.add(sid)
                self._deadline.pop(sid, None)
                continue
            created = session.record.created_at
            start = created if now - created <= _SEEN_LATE_S else now
            deadline = self._deadline.setdefault(sid, start + self.bound_s)
            if now >= deadline:
                out.append(sid)
        return out
