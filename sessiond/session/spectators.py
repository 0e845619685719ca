"""`SpectatorPort`: one spectator connection's view of a session (implements transports'
`AudiencePort`). Output: the session's shared packed stream (its audience member's bounded
queue) after its own replies. Input: `ping` is answered, `received` is ignored (a spectator's
window never holds the session back), and anything that steers (action, direct, interrupt,
flush, pause, resume) gets a non-fatal `forbidden`, counted; a spectator whose replies pile up
unread past `max_pending_messages` is ended like any connection."""

from __future__ import annotations

from typing import Any

from protocols.errors import ErrorCode
from protocols.messages import ClientMessage, Error, Hello, Ping, Pong, Presence, Received
from sessiond.grants import Access
from sessiond.session.audience import FrameFeed, Member
from sessiond.session.session import Session
from transports.fanout import Packed, SharedPacker

__all__ = ["RtcMemberPort", "RtcSpectatorPort", "SpectatorPort", "join_audience", "join_rtc"]


def join_audience(session: Session, access: Access, packer: SharedPacker, *, max_frames: int) -> SpectatorPort:
    """A new spectator of `session` fed by `packer` (or by the session's packer of that media
    mode, when one already runs); ended at once when the session has ended."""
    member = Member(access, packer.media, max_frames=max_frames)
    member.join_idx = session.out.sent
    if session.state.terminal:
        member.end("session_closed")
        return SpectatorPort(session, member, packer)
    session.audience.join(member, packer)
    shared = session.audience.packer(packer.media) or packer
    port = SpectatorPort(session, member, shared)
    session.set_spectators(len(session.audience))  # `presence` to everyone (co-play)
    session.watch_presence(member, member.push_presence)  # who plays, how many watch: now and on every change
    return port


class SpectatorPort:
    def __init__(self, session: Session, member: Member, packer: SharedPacker) -> None:
        self._session = session
        self.member = member
        self.session_id = session.id
        self.media = member.media
        self.init: list[bytes] = list(packer.init)

    def submit(self, message: ClientMessage) -> None:
        member = self.member
        if member.connection.state != member.connection.state.OPEN:
            return
        if isinstance(message, Ping):
            self._reply(Pong(re=message.id, ts=message.ts))
        elif isinstance(message, Received):
            return
        elif isinstance(message, Hello):
            self._refuse(ErrorCode.CONFLICT, "hello was already received on this connection")
        else:
            kind = type(message).__name__.lower()
            self._refuse(ErrorCode.FORBIDDEN, f"a spectator may not send {kind}: this token only watches",
                         getattr(message, "id", None))

    def _refuse(self, code: ErrorCode, message: str, re: Any = None) -> None:
        self._session.env.metrics.protocol_errors.labels(code=code.value).inc()
        self._reply(Error(code=code.value, message=message, fatal=False, re=re if isinstance(re, int) else None))

    def _reply(self, message: Any) -> None:
        if not self.member.reply(message, self._session.env.max_pending_messages):
            self._session.env.metrics.protocol_errors.labels(code=ErrorCode.RATE_LIMITED.value).inc()

    async def next_output(self) -> Packed | Any | None:
        return await self.member.next()

    def mark_sent(self, item: Packed) -> None:
        self.member.sent(item)
        if item.frames:
            self._session.env.metrics.spectator_frames_sent.inc(item.frames)

    def stalled(self) -> None:
        """Its socket took nothing for the stall bound: it is dropped."""
        self.dropped("stalled")

    def dropped(self, reason: str) -> None:
        """The transport let it go (`stalled`, `ping_timeout`): it ends with that reason, which
        `Audience.leave` counts in sessiond_spectators_dropped and logs with `spectator_left`."""
        self.member.end(reason)

    async def close(self) -> None:
        self._session.unwatch_presence(self.member)
        self._session.audience.leave(self.member)
        self.member.close()


def join_rtc(session: Session, access: Access, *, max_frames: int) -> tuple[RtcSpectatorPort, FrameFeed]:
    """A WebRTC spectator of `session`: its own port (what it sends) and the shared feed its
    peer's stream reads (one encode for every WebRTC spectator of the session)."""
    member = Member(access, "webrtc", max_frames=max_frames)
    member.join_idx = session.out.sent
    feed = session.audience.join_rtc(member, max_frames)
    record = session.record
    feed.width, feed.height, feed.fps = record.width, record.height, record.fps
    port = RtcSpectatorPort(session, member)
    if session.state.terminal:
        member.end("session_closed")
        feed.end()
        return port, feed
    session.set_spectators(len(session.audience))  # `presence` to everyone (co-play)
    session.watch_presence(member, port.presence)  # who plays, how many watch: now and on every change
    return port, feed


class RtcMemberPort:
    """The WebRTC side of an audience member (a spectator's here, a co-player's in
    sessiond.session.players): its messages in (answered on its own control channel through
    `reply`, which its peer sets), who plays and how many watch, its leaving; the media comes from
    the session's shared feed."""

    def __init__(self, session: Session, member: Member) -> None:
        self._session = session
        self.member = member
        self.session_id = session.id
        self.width = session.record.width
        self.height = session.record.height
        self.fps = session.record.fps
        self.reply: Any = None  # Callable[[message], None]: its peer's control channel
        self.hang_up: Any = None  # Callable[[], None]: closes its peer (set with `reply`)
        self._presence: Presence | None = None  # the latest, until its peer is bound
        member.on_end = self._ended

    def bind(self, reply: Any, hang_up: Any) -> None:
        """Its peer: `reply` puts one message on its control channel, `hang_up` closes it."""
        self.reply = reply
        self.hang_up = hang_up
        if self.member.connection.state != self.member.connection.state.OPEN:
            self._ended()
        elif self._presence is not None:
            reply(self._presence)
            self._presence = None

    def presence(self, message: Presence) -> None:
        """Who plays and how many watch, on its own control channel (held until its peer is bound)."""
        if self.member.connection.state != self.member.connection.state.OPEN:
            return
        if self.reply is None:
            self._presence = message
        else:
            self.reply(message)

    def _ended(self) -> None:
        """Its member ended (revoked, replaced, session closed or moved): what it was told goes out,
        then its peer closes."""
        while self.member.control and self.reply is not None:
            self.reply(self.member.control.popleft())
        if self.hang_up is not None:
            self.hang_up()

    def _open(self) -> bool:
        return self.member.connection.state == self.member.connection.state.OPEN and self.reply is not None

    def generation(self) -> int:
        return 0

    async def next_output(self) -> Any:
        return None  # its media and the stream's messages come from the shared feed's stream

    def mark_sent(self, frame: Any) -> None:
        return None

    def close(self) -> None:
        self._session.unwatch_presence(self.member)
        self._session.audience.leave(self.member)
        self.member.close()


class RtcSpectatorPort(RtcMemberPort):
    """A WebRTC spectator: it may ping; whatever would steer is `forbidden`."""

    def dropped(self, reason: str) -> None:
        """Its peer went away without a goodbye (`rtcp_silent`: transports/webrtc/_liveness.py):
        counted like a WebSocket spectator's drop when it leaves."""
        self.member.end(reason)

    def submit(self, message: ClientMessage) -> None:
        if not self._open():
            return
        if isinstance(message, Ping):
            self.reply(Pong(re=message.id, ts=message.ts))
        elif not isinstance(message, Received | Hello):
            kind = type(message).__name__.lower()
            self._session.env.metrics.protocol_errors.labels(code=ErrorCode.FORBIDDEN.value).inc()
            re = getattr(message, "id", None)
            self.reply(Error(code=ErrorCode.FORBIDDEN.value, fatal=False, re=re if isinstance(re, int) else None,
                             message=f"a spectator may not send {kind}: this token only watches"))

    def close(self) -> None:
        super().close()
        self._session.set_spectators(len(self._session.audience))
