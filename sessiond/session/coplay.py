"""Co-play: up to `MAX_PLAYERS` people steer one world session (docs/protocol.md, "Co-play").

The owner is player 0 and keeps the session's own `ActionTimeline` (its one-player behaviour is
unchanged); each invited player k (1..seats-1) has a timeline of its own beside it, with its own
`seq` (strictly increasing per player), rate and action-to-photon bookkeeping. At a chunk boundary
every player's state is sampled and merged into the one `FrameAction` the engine gets:

- keys: OR-ed (a key is held when any player holds it), in player order, each named once;
- buttons: OR-ed bitmasks;
- axes: summed per axis, clamped to the action space's range [-1, 1] (as long as the longest);
- mouse: summed (each player's movement since the previous chunk).

A player that leaves lets go of everything it held: its contribution is gone from the next chunk.
The chunk remembers each player's newest applied `seq` (`players[k]`): the frame a player
receives carries its own entry as `action_seq`, so each measures its own action-to-photon.
Pure logic: no I/O, no clock of its own (callers pass `now`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.api import ActionSpace, FrameAction
from protocols.messages import MAX_PLAYERS, Frame, FramesInfo, Media, Presence
from sessiond.session.actions import ActionTimeline
from transports.interface import OutChunk

__all__ = ["AXIS_RANGE", "MAX_PLAYERS", "CoPlay", "Seat", "merge", "seen_by"]

AXIS_RANGE = (-1.0, 1.0)  # every model's axes lie in [-1, 1] (engine.actions.validate_action)


def merge(parts: Sequence[FrameAction]) -> FrameAction:
    """The one conditioning of a chunk from every player's sampled state (player order)."""
    keys: list[str] = []
    seen: set[str] = set()
    buttons = 0
    dx = dy = 0.0
    width = max((len(p.axes) for p in parts), default=0)
    axes = [0.0] * width
    for part in parts:
        for key in part.keys:
            if key not in seen:
                seen.add(key)
                keys.append(key)
        buttons |= part.buttons
        dx += part.mouse[0]
        dy += part.mouse[1]
        for i, value in enumerate(part.axes):
            axes[i] += value
    low, high = AXIS_RANGE
    return FrameAction(keys=tuple(keys), mouse=(dx, dy), buttons=buttons,
                       axes=tuple(min(high, max(low, v)) for v in axes))


@dataclass
class Seat:
    """One invited player's place: its grant, its label and its own action timeline."""

    player: int  # 1..seats-1 (the owner is 0)
    grant_id: str
    label: str
    timeline: ActionTimeline
    connections: int = 0  # its open connections (a reconnect may overlap the old one briefly)

    @property
    def connected(self) -> bool:
        return self.connections > 0


class CoPlay:
    """The invited players of one world session (player 0, the owner, is the Session's own timeline)."""

    def __init__(self, space: ActionSpace, seats: int, max_actions_per_s: int) -> None:
        if not 1 <= seats <= MAX_PLAYERS:
            raise ValueError(f"players {seats}: must be 1..{MAX_PLAYERS}")
        self.space = space
        self.seats = seats
        self.max_actions_per_s = max_actions_per_s
        self._by_player: dict[int, Seat] = {}

    def seat(self, player: int, grant_id: str, label: str = "") -> Seat:
        """The seat of `player` (made on first use; a re-issued seat keeps its timeline's seqs)."""
        if not 1 <= player < self.seats:
            raise ValueError(f"player {player}: this session seats players 1..{self.seats - 1} beside its owner")
        seat = self._by_player.get(player)
        if seat is None or seat.grant_id != grant_id:
            seat = Seat(player, grant_id, label, ActionTimeline(self.space, self.max_actions_per_s))
            self._by_player[player] = seat
        return seat

    def get(self, player: int) -> Seat | None:
        return self._by_player.get(player)

    @property
    def seated(self) -> list[Seat]:
        return [self._by_player[k] for k in sorted(self._by_player)]

    def join(self, player: int, grant_id: str, label: str = "") -> Seat:
        """A connection of `player` opened. It takes the seat over (sessiond.session.players): what
        an older connection of the seat still held is let go now, as a leaving player's is (that one
        ends; its own leave comes later and finds the seat still connected)."""
        seat = self.seat(player, grant_id, label)
        if seat.connections:
            seat.timeline.release()
        seat.connections += 1
        return seat

    def leave(self, player: int) -> bool:
        """One connection of `player` ended; True when it was its last (its held state is let go)."""
        seat = self._by_player.get(player)
        if seat is None or seat.connections == 0:
            return False
        seat.connections -= 1
        if seat.connections:
            return False
        seat.timeline.release()
        return True

    def accept(self, player: int, action: Any, now: float) -> str:
        """Merge one checked action of `player` into its own timeline ("stale", "coalesced", "ok");
        "stale" too when the player has no seat."""
        seat = self._by_player.get(player)
        if seat is None or not seat.connected:
            return "stale"
        return seat.timeline.accept(action, now)

    def sample(self, owner: FrameAction, owner_seq: int) -> tuple[FrameAction, tuple[int, ...] | None]:
        """The merged chunk conditioning and every seat's newest applied seq (index = player; -1
        for none). With no player seated: the owner's own sample and None (one-player play)."""
        if not self._by_player:
            return owner, None
        parts = [owner]
        seqs = [owner_seq] + [-1] * (self.seats - 1)
        for seat in self.seated:
            part = seat.timeline.sample()
            if seat.connected:
                parts.append(part)
            seqs[seat.player] = seat.timeline.last_seq
        return merge(parts), tuple(seqs)

    def photons(self, player: int, action_seq: int, now: float) -> list[float]:
        seat = self._by_player.get(player)
        return [] if seat is None else seat.timeline.photons(action_seq, now)

    def presence(self, owner_connected: bool, spectators: int, owner_label: str = "owner") -> Presence:
        players: list[dict[str, Any]] = [{"player": 0, "label": owner_label, "connected": owner_connected}]
        players += [{"player": s.player, "label": s.label, "connected": s.connected} for s in self.seated]
        return Presence(players=tuple(players), spectators=spectators)

    def free_player(self, taken: Iterable[int]) -> int | None:
        """The lowest player index 1..seats-1 not in `taken`, or None when every seat is taken."""
        used = set(taken)
        return next((k for k in range(1, self.seats) if k not in used), None)


def _own_seq(players: tuple[int, ...] | None, player: int, fallback: int) -> int:
    """Player `player`'s newest action the frame applied. A frame made while no co-player was
    seated (`players` None: the chunks generated ahead when one joins) applied none of a
    co-player's actions (-1); the owner's is the frame's own `action_seq`. Handing a joining
    co-player the owner's seq there made its page take that number as shown, and wait for its own
    actions to pass it before measuring anything."""
    if players is None:
        return fallback if player == 0 else -1
    if not 0 <= player < len(players):
        return fallback
    return players[player]


def seen_by(item: Any, player: int) -> Any:
    """`item` (an OutChunk, or a frame / media / frames message) as player `player` receives it:
    `action_seq` is that player's own newest applied action. Anything else is returned as is."""
    if isinstance(item, OutChunk):
        return OutChunk(frames=tuple(
            dataclasses.replace(f, action_seq=_own_seq(f.players, player, f.action_seq)) for f in item.frames))
    if isinstance(item, Frame | Media | FramesInfo):
        return dataclasses.replace(item, action_seq=_own_seq(item.players, player, item.action_seq))
    return item
