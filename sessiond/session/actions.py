"""A session's action state: the merge rules of PROTOCOL.md and the per-session rate limit.

Held keys, buttons and axes: the latest message wins. Mouse: movements accumulate until a chunk
consumes them. `seq` must strictly increase; older or repeated ones are ignored. Over the rate
limit, actions are still merged (coalesced, latest wins) but counted, and not logged one by one.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

__all__ = ["ActionInput", "ActionState", "Sample"]


@dataclass(frozen=True)
class ActionInput:
    seq: int
    keys: tuple[str, ...]
    mouse: tuple[float, float] | None = None
    buttons: int | None = None
    axes: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Sample:
    """What one chunk is conditioned on, taken at its boundary."""

    keys: tuple[str, ...]
    mouse: tuple[float, float]
    buttons: int
    axes: tuple[float, ...]
    action_seq: int  # newest action merged in, -1 if none ever


class ActionState:
    def __init__(self, max_per_s: int, max_pending_photons: int = 1024) -> None:
        self.max_per_s = max_per_s
        self.last_seq = -1
        self._keys: tuple[str, ...] = ()
        self._buttons = 0
        self._axes: tuple[float, ...] = ()
        self._mouse = [0.0, 0.0]
        self._window: deque[float] = deque()  # receipt times within the last second
        self._photons: deque[tuple[int, float]] = deque(maxlen=max_pending_photons)

    def accept(self, action: ActionInput, now: float) -> str:
        """Merge one action. Returns "stale" (ignored), "coalesced" (over the rate) or "ok"."""
        if action.seq <= self.last_seq:
            return "stale"
        while self._window and now - self._window[0] >= 1.0:
            self._window.popleft()
        over = len(self._window) >= self.max_per_s
        if not over:
            self._window.append(now)
        self.last_seq = action.seq
        self._keys = tuple(action.keys)
        if action.buttons is not None:
            self._buttons = action.buttons
        if action.axes is not None:
            self._axes = tuple(action.axes)
        if action.mouse is not None:
            self._mouse[0] += action.mouse[0]
            self._mouse[1] += action.mouse[1]
        self._photons.append((action.seq, now))
        return "coalesced" if over else "ok"

    def sample(self) -> Sample:
        """The conditioning for the chunk that begins now; consumes the accumulated mouse."""
        out = Sample(self._keys, (self._mouse[0], self._mouse[1]), self._buttons, self._axes, self.last_seq)
        self._mouse = [0.0, 0.0]
        return out

    def photons(self, action_seq: int, now: float) -> list[float]:
        """Latencies (s) of the actions a frame conditioned on `action_seq` just delivered."""
        out = []
        while self._photons and self._photons[0][0] <= action_seq:
            out.append(now - self._photons.popleft()[1])
        return out
