"""A session's action timeline: every `action` from any transport is checked here against the
model's action space (the engine's rules), merged, rate-limited, and sampled into the engine's
`FrameAction` at each chunk boundary.

Merge rules (docs/protocol.md): held keys, buttons and axes: the latest message wins; mouse
movements accumulate until a chunk consumes them; `seq` must strictly increase (older or
repeated ones are ignored). Rate: over `max_per_s` actions in the last second, actions are
still merged (coalesced, latest wins) but counted, and not logged one by one. This is the one
action rate policy of the daemon, for WebSocket and WebRTC alike.
"""

from __future__ import annotations

from collections import deque

from engine.actions import validate_action
from engine.api import ActionSpace, FrameAction
from engine.errors import ActionError
from protocols.messages import Action

__all__ = ["ActionTimeline"]

# the engine's action error codes -> the wire field they name
_FIELDS = {"bad_action_key": "keys", "bad_action_mouse": "mouse", "bad_action_buttons": "buttons",
           "bad_action_axes": "axes"}


class ActionTimeline:
    def __init__(self, space: ActionSpace, max_per_s: int, max_pending_photons: int = 1024) -> None:
        if max_per_s <= 0:
            raise ValueError(f"action rate {max_per_s}/s: must be positive")
        self.space = space
        self.max_per_s = max_per_s
        self.last_seq = -1
        self._keys: tuple[str, ...] = ()
        self._buttons = 0
        self._axes: tuple[float, ...] = ()
        self._mouse = [0.0, 0.0]
        self._window: deque[float] = deque()  # receipt times within the last second
        self._photons: deque[tuple[int, float]] = deque(maxlen=max_pending_photons)

    def check(self, action: Action) -> tuple[str, str] | None:
        """(field, why) when the action does not fit the model's action space, else None."""
        try:
            validate_action(self.space, FrameAction(
                keys=tuple(action.keys), mouse=action.mouse if action.mouse is not None else (0.0, 0.0),
                buttons=action.buttons if action.buttons is not None else 0,
                axes=tuple(action.axes) if action.axes is not None else ()))
        except ActionError as exc:
            return _FIELDS.get(exc.code, "keys"), exc.message
        return None

    def accept(self, action: Action, now: float) -> str:
        """Merge one checked action. Returns "stale" (ignored), "coalesced" (over the rate) or "ok"."""
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

    def sample(self) -> FrameAction:
        """The conditioning for the chunk that begins now (its newest action is `last_seq`);
        consumes the accumulated mouse."""
        out = FrameAction(keys=self._keys, mouse=(self._mouse[0], self._mouse[1]), buttons=self._buttons,
                          axes=self._axes)
        self._mouse = [0.0, 0.0]
        return out

    def release(self) -> None:
        """Nothing held any more (a co-player left): keys, buttons and axes let go, unconsumed
        mouse movement dropped; `last_seq` stays, so an old action arriving late is still stale."""
        self._keys = ()
        self._buttons = 0
        self._axes = ()
        self._mouse = [0.0, 0.0]
        self._photons.clear()

    def photons(self, action_seq: int, now: float) -> list[float]:
        """Latencies (s) of the actions a frame conditioned on `action_seq` just delivered."""
        out = []
        while self._photons and self._photons[0][0] <= action_seq:
            out.append(now - self._photons.popleft()[1])
        return out
