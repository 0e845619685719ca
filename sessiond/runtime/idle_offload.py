"""When an idle session's KV goes to host memory.

An offload runs on the engine thread between steps, so every other session waits for it, and on a
GPU it is not cheap: the start-up profile measured 0.21-0.31 s on the H100 and 3.3 s on the H200 for
one world-geometry session (1.3-2.6 GB). While the KV pool has room it buys nothing (the pool is
allocated whole at start) and costs a restore when the session comes back. So a session idle for
`idle_offload_s` is offloaded at once only where an offload costs at most `CHEAP_OFFLOAD_S` (an
engine on the CPU: 1-2 ms); elsewhere only when the pool is short of one session's slabs (the next
admission or restore would find no room), the longest idle first, one a tick. Admission's answer to
overload ("offload_idle") is held to the same rule: a dear offload under load takes engine time from
the sessions it was meant to relieve.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from engine.api import KVStats

__all__ = ["CHEAP_OFFLOAD_S", "IdleOffload"]

CHEAP_OFFLOAD_S = 0.05  # an offload this short disturbs no frame deadline (a frame is 31-62 ms)

S = TypeVar("S")


@dataclass(frozen=True)
class IdleOffload:
    idle_offload_s: float  # idle this long: the KV may go to host memory
    session_kv_bytes: int  # one session's KV: the room the pool keeps free by offloading idle sessions
    offload_s: Callable[[], float | None]  # seconds of one offload (predicted or last measured); None: unknown

    def cheap(self) -> bool:
        """An offload disturbs nobody (unknown counts as cheap: the first one measures it)."""
        seconds = self.offload_s()
        return seconds is None or seconds <= CHEAP_OFFLOAD_S

    def short_of_room(self, kv: KVStats | None) -> bool:
        """The pool's free slabs would not hold one more session."""
        if kv is None:
            return False
        return kv.slabs_free < math.ceil(self.session_kv_bytes / max(1, kv.slab_bytes))

    def choose(self, idle: list[tuple[float, S]], kv: KVStats | None) -> list[S]:
        """Of (seconds idle, session) for sessions that could be offloaded, those to offload now."""
        ripe = [(idle_for, session) for idle_for, session in idle if idle_for >= self.idle_offload_s]
        if not ripe:
            return []
        if self.cheap():
            return [session for _, session in ripe]
        if self.short_of_room(kv):
            return [max(ripe, key=lambda r: r[0])[1]]
        return []
