"""`PlayerPort`: one co-player's WebSocket to a world session (implements transports'
`AudiencePort`, as a spectator's does); `RtcPlayerPort`: one co-player's WebRTC peer.

Output rides on the session's audience fan-out (`sessiond.session.audience`): the same shared
packing of the frames the owner got, the same idx and pts, from a bounded queue of its own. What
differs from a spectator's:
- each frame (`frame`, `media`) is re-encoded for this player with `action_seq` = the player's
  own newest applied action (`players[k]`; sessiond.session.coplay), so each player measures its
  own action-to-photon. Only the msgpack wrapper is redone, never the picture or the H.264 encode;
- input: actions go to the player's own timeline, merged with the others' at each chunk;
  `ping` is answered; the owner's requests (direct, interrupt, flush, pause, resume) are
  `forbidden` (sessiond.session.inbound.handle_player);
- `presence` reaches it on every change of who plays or how many watch;
- one connection per seat: a new connection of the same seat takes over (the old one ends),
  whatever the transport of either.

Over WebRTC a co-player is one more viewer of the session's WebRTC spectator stream (one H.264
encode for every WebRTC viewer, spectators and co-players alike; `join_rtc_player`): the picture
is the same for all, and only the stream's per-chunk `frames` message is retold on the player's
own control channel with its own `action_seq` (`RtcPlayerPort.outgoing`), which is where its
action-to-photon is counted (that message goes out in the same step as the chunk's first frame
goes on its video track). A second encode per player would cost a core per few players on a small
machine for the same picture.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from protocols.codec import decode, encode
from protocols.errors import ErrorCode, ProtocolError
from protocols.messages import ClientMessage, Error, Frame, FramesInfo, Media, Welcome
from sessiond.grants import Access
from sessiond.session.audience import FrameFeed, Member
from sessiond.session.coplay import seen_by
from sessiond.session.inbound import handle_player
from sessiond.session.session import Session
from sessiond.session.spectators import RtcMemberPort
from transports.fanout import Packed, SharedPacker

__all__ = ["PlayerPort", "RtcPlayerPort", "join_as_player", "join_rtc_player", "retarget", "seat_seq"]

_MAX_PACKED = 1 << 30  # a shared packed frame is ours: read back without the inbound size limit


def retarget(item: Packed, player: int) -> tuple[Packed, int | None]:
    """`item` as player `player` receives it, and that player's applied seq (None: not a frame of
    a co-play chunk, passed on as it is)."""
    if not item.frames:
        return item, None
    try:
        msg = decode(item.data, max_bytes=_MAX_PACKED, expect="server")
    except ProtocolError:
        return item, None
    if not isinstance(msg, Frame | Media) or (msg.players is not None and not 0 <= player < len(msg.players)):
        return item, None
    if msg.players is None and player == 0:
        return item, None  # the owner's own frame, as made
    own = seen_by(msg, player).action_seq  # made before any co-player sat: -1, never the owner's
    if own == msg.action_seq:
        return item, own
    return dataclasses.replace(item, data=encode(dataclasses.replace(msg, action_seq=own))), own


def seat_seq(session: Session, player: int) -> int:
    """The newest `seq` seat `player` accepted (-1: none yet). A new connection of the seat hears it
    in its welcome (`session.last_seq`): its own actions go on above it (an older seq is stale, as
    on any connection), so a page opened afresh on the seat steers from its first action."""
    seat = session.coplay.get(player)
    return -1 if seat is None else seat.timeline.last_seq


def _take_over(session: Session, player: int) -> None:
    """One connection per seat: the seat's connection already there (WebSocket or WebRTC) ends."""
    for old in session.audience.members:
        if old.access.seat == player and not old.closed:
            old.end("replaced", Error(code=ErrorCode.CONFLICT.value, fatal=True,
                                      message=f"player {player} connected again elsewhere; this connection ends"))


def join_as_player(session: Session, access: Access, packer: SharedPacker, *, max_frames: int) -> PlayerPort:
    """Co-player `access.player` joins `session`'s audience fed by `packer`; a connection of the
    same seat already there ends (this one takes over)."""
    player = access.seat
    if player is None or player < 1:
        raise ValueError(f"not a co-player's access: {access}")
    member = Member(access, packer.media, max_frames=max_frames)
    if session.state.terminal:
        member.end("session_closed")
        return PlayerPort(session, member, packer, player)
    _take_over(session, player)
    session.audience.join(member, packer)
    shared = session.audience.packer(packer.media) or packer
    port = PlayerPort(session, member, shared, player)
    grant = next((g for g in session.record.grants if g.grant_id == access.grant_id), None)
    session.join_player(player, access.grant_id or "", grant.label if grant is not None else "")
    session.watch_presence(member, member.push_presence)
    return port


class PlayerPort:
    def __init__(self, session: Session, member: Member, packer: SharedPacker, player: int) -> None:
        self._session = session
        self.member = member
        self.player = player
        self.session_id = session.id
        self.media = member.media
        self.init: list[bytes] = list(packer.init)
        self._joined = not member.connection.ending and not member.closed
        self._last: tuple[Packed, int] | None = None

    def submit(self, message: ClientMessage) -> None:
        if self.member.connection.state != self.member.connection.state.OPEN:
            return
        handle_player(self._session, self.player, message, self.reply)

    def reply(self, message: Any) -> None:
        """Its own control queue (replies, errors, presence); past `max_pending_messages` unread,
        it is ended like any connection."""
        member = self.member
        if member.connection.state != member.connection.state.OPEN:
            return
        if not member.reply(message, self._session.env.max_pending_messages):
            self._session.env.metrics.protocol_errors.labels(code=ErrorCode.RATE_LIMITED.value).inc()

    async def next_output(self) -> Packed | Any | None:
        item = await self.member.next()
        if isinstance(item, Packed):
            mine, seq = retarget(item, self.player)
            self._last = None if seq is None else (mine, seq)
            return mine
        return item

    def mark_sent(self, item: Packed) -> None:
        self.member.sent(item)
        last = self._last
        if last is not None and last[0] is item:
            self._session.player_sent(self.player, last[1])
            self._last = None

    def stalled(self) -> None:
        self.member.end("stalled")

    async def close(self) -> None:
        self._session.unwatch_presence(self.member)
        self._session.audience.leave(self.member)
        self.member.close()
        if self._joined:
            self._joined = False
            self._session.leave_player(self.player)


def join_rtc_player(session: Session, access: Access, *, max_frames: int,
                    welcome: Welcome | None = None) -> tuple[RtcPlayerPort, FrameFeed]:
    """Co-player `access.player` over WebRTC: its own port (what it sends, its replies, presence and
    its own `frames` messages) and the shared feed its peer's stream reads (the session's one
    encode for WebRTC viewers); a connection of the same seat already there ends (this one takes over).
    `welcome`, when given, is the first message on its control channel: a co-player has no create
    response, and this is where it learns its seat, the action space and the limits."""
    player = access.seat
    if player is None or player < 1:
        raise ValueError(f"not a co-player's access: {access}")
    member = Member(access, "webrtc", max_frames=max_frames)
    member.join_idx = session.out.sent
    if not session.state.terminal:
        _take_over(session, player)  # the old connection sends nothing more: the seat's seq stands
    if welcome is not None:
        welcome = dataclasses.replace(welcome, session=welcome.session | {"last_seq": seat_seq(session, player)})
    feed = session.audience.join_rtc(member, max_frames)
    record = session.record
    feed.width, feed.height, feed.fps = record.width, record.height, record.fps
    port = RtcPlayerPort(session, member, player, welcome)
    if session.state.terminal:
        member.end("session_closed")
        feed.end()
        return port, feed
    grant = next((g for g in session.record.grants if g.grant_id == access.grant_id), None)
    port.joined = True
    session.join_player(player, access.grant_id or "", grant.label if grant is not None else "")
    session.watch_presence(member, port.presence)
    return port, feed


class RtcPlayerPort(RtcMemberPort):
    """A co-player's WebRTC side: its messages steer (through `handle_player`, answered on its own
    control channel), the shared stream's messages are retold for it (`outgoing`), and its
    `welcome` (it has no create response) is the first message on its control channel."""

    def __init__(self, session: Session, member: Member, player: int, welcome: Welcome | None = None) -> None:
        super().__init__(session, member)
        self._welcome = welcome
        self.player = player
        self.joined = False  # its seat counts this connection (let go once, on close)

    def bind(self, reply: Any, hang_up: Any) -> None:
        if self._welcome is not None:
            reply(self._welcome)
        super().bind(reply, hang_up)

    def outgoing(self, message: Any) -> Any:
        """A message of the shared stream as this player receives it: `frames` carries its own newest
        applied action as `action_seq`; the chunk's first frame goes on its track in the same step,
        so its action-to-photon is counted here."""
        mine = seen_by(message, self.player)
        if isinstance(mine, FramesInfo) and mine.players is not None:
            self._session.player_sent(self.player, mine.action_seq)
        return mine

    def submit(self, message: ClientMessage) -> None:
        if self._open():
            handle_player(self._session, self.player, message, self.reply)

    def close(self) -> None:
        super().close()
        if self.joined:
            self.joined = False
            self._session.leave_player(self.player)
