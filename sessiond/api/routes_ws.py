"""`GET /v1/sessions/{sid}/ws?media=raw|fmp4&token=...`: authenticate, attach a connection
port to the session and hand the socket to transports.websocket."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import Executor

from starlette.websockets import WebSocket, WebSocketDisconnect

from httpapi import bearer_token, refuse_socket
from protocols.errors import ErrorCode, ProtocolError
from protocols.messages import Limits
from sessiond.api.routes_http import base_url
from sessiond.api.ws_protocol import PING_TIMEOUT_CODE, PING_TIMEOUT_REASON
from sessiond.grants import Access, Role, require
from sessiond.runtime.daemon import Daemon
from sessiond.runtime.directory import open_for_connection
from sessiond.session import Session, connect
from sessiond.session.players import PlayerPort, join_as_player, seat_seq
from sessiond.session.spectators import SpectatorPort, join_audience
from transports.fanout import SharedPacker
from transports.interface import MediaPacker
from transports.raw import RawPacker
from transports.spectator import SpectatorConnection, SpectatorOptions
from transports.websocket import ConnectionOptions, WebSocketConnection

__all__ = ["StarletteWire", "make_packer", "session_socket"]

logger = logging.getLogger(__name__)


class StarletteWire:
    """transports.websocket.WireSocket over a Starlette WebSocket. `on_gone`, when set, hears why
    the server let the peer go (`ping_timeout`: it answered no ping in time; sessiond/api/ws_protocol.py)."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.gone = False
        self.on_gone: Callable[[str], None] | None = None

    async def receive(self) -> bytes | str | None:
        if self.gone:
            return None
        try:
            message = await self.ws.receive()
        except (WebSocketDisconnect, RuntimeError):
            self.gone = True
            return None
        if message["type"] == "websocket.disconnect":
            self.gone = True
            if (message.get("code"), message.get("reason")) == (PING_TIMEOUT_CODE, PING_TIMEOUT_REASON) \
                    and self.on_gone is not None:
                self.on_gone("ping_timeout")
            return None
        if message.get("bytes") is not None:
            return bytes(message["bytes"])
        return str(message.get("text") or "")

    async def send(self, data: bytes) -> None:
        try:
            await self.ws.send_bytes(data)
        except (WebSocketDisconnect, RuntimeError) as exc:
            self.gone = True
            raise ConnectionError("the client has gone") from exc

    async def close(self, code: int, reason: str = "") -> None:
        if self.gone:
            return
        self.gone = True
        with contextlib.suppress(RuntimeError, WebSocketDisconnect, OSError):
            await self.ws.close(code, reason)


def _check_media(media: str) -> None:
    if media not in ("raw", "fmp4"):
        raise ProtocolError(ErrorCode.INVALID_FIELD, f"media must be raw or fmp4, got {media[:16]!r}", "media")


async def make_packer(media: str, width: int, height: int, fps: int, executor: Executor | None) -> MediaPacker:
    """The connection's packer. An fMP4 packer opens an H.264 encoder (milliseconds of work), so
    it is built in `executor`, never on the event loop."""
    _check_media(media)
    if media == "raw":
        return RawPacker()
    try:
        from transports.fmp4 import Fmp4Packer
    except ImportError as exc:
        raise ProtocolError(ErrorCode.INVALID_FIELD, f"media=fmp4 is not available in this build ({exc})",
                            "media") from exc
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(executor, Fmp4Packer, width, height, fps)
    except (ValueError, OSError, RuntimeError) as exc:  # the encoder would not open at this size
        logger.error("fMP4 packer for %dx%d@%d failed: %r", width, height, fps, exc)
        raise ProtocolError(ErrorCode.INTERNAL, f"the fMP4 encoder could not start ({exc}); use media=raw",
                            "media") from exc


async def session_socket(ws: WebSocket) -> None:
    daemon: Daemon = ws.app.state.daemon
    sid = ws.path_params["sid"]
    await ws.accept()
    media = ws.query_params.get("media", "raw")
    try:
        _check_media(media)
        session, access = await open_for_connection(daemon, sid, bearer_token(ws), base_url(ws))
        if access.role == Role.VIEWER:
            await _spectate(ws, daemon, session, access, media)
            return
        if access.role == Role.PLAYER:
            await _play(ws, daemon, session, access, media)
            return
        require(access, own=True, what="a WebSocket connection (co-players: not served yet)")
        record = session.record
        packer = await make_packer(media, record.width, record.height, record.fps, daemon.executor)
    except ProtocolError as exc:
        daemon.metrics.protocol_errors.labels(code=exc.code.value).inc()
        await refuse_socket(ws, exc)
        return
    c = daemon.config
    limits = Limits(max_message_bytes=c.max_message_bytes, max_actions_per_s=c.max_actions_per_s,
                    max_prompt_chars=c.max_prompt_chars, window_frames=c.window_frames(session.record.fps))
    conn = WebSocketConnection(
        StarletteWire(ws), lambda: connect(session, media), packer, dict(session.public) | {"role": "owner"},
        ConnectionOptions(limits=limits, hello_timeout_s=c.hello_timeout_s, inbound=daemon.inbound_limits()),
        executor=daemon.executor, on_error=daemon.count_protocol_error)
    await conn.run()


def _limits(daemon: Daemon, session: Session) -> Limits:
    c = daemon.config
    return Limits(max_message_bytes=c.max_message_bytes, max_actions_per_s=c.max_actions_per_s,
                  max_prompt_chars=c.max_prompt_chars, window_frames=c.window_frames(session.record.fps))


async def _shared_packer(daemon: Daemon, session: Session, media: str) -> SharedPacker:
    """The session's one packing of `media` for its spectators and co-players (built for the first
    of them), in the spectators' executor: it never queues ahead of an owner's packing."""
    shared = session.audience.packer(media)
    if shared is not None:
        return shared
    record = session.record
    packer = await make_packer(media, record.width, record.height, record.fps, daemon.spectator_executor)
    return SharedPacker(packer, daemon.spectator_executor, session.audience.deliver_to(media),
                        on_cpu=daemon.spectators.record_pack)


async def _spectate(ws: WebSocket, daemon: Daemon, session: Session, access: Access, media: str) -> None:
    """A viewer token's connection: admitted (connect rate, spectators' CPU bound), then fed the
    session's shared packing of `media` (built for the first spectator of that mode)."""
    try:
        daemon.spectators.admit(session.id, sum(len(s.audience) for s in daemon.sessions.values()))
        shared = await _shared_packer(daemon, session, media)
    except ProtocolError as exc:
        daemon.metrics.protocol_errors.labels(code=exc.code.value).inc()
        daemon.metrics.spectators_refused.labels(reason=exc.code.value).inc()
        await refuse_socket(ws, exc)
        return
    c = daemon.config
    packer_ = shared
    wire = StarletteWire(ws)

    async def attach() -> SpectatorPort:
        port = join_audience(session, access, packer_, max_frames=c.spectator_queue_frames)
        wire.on_gone = port.dropped  # a ping timeout ends it with that reason (counted, logged)
        return port

    conn = SpectatorConnection(
        wire, attach, dict(session.public) | {"role": "viewer"},
        SpectatorOptions(limits=_limits(daemon, session), hello_timeout_s=c.hello_timeout_s,
                         stall_s=c.spectator_stall_s, inbound=daemon.inbound_limits()),
        on_error=daemon.count_protocol_error, on_send_cpu=daemon.spectators.send_meter())
    await conn.run()


async def _play(ws: WebSocket, daemon: Daemon, session: Session, access: Access, media: str) -> None:
    """A co-player's connection (a player invite's token): fed from the session's shared packing
    of `media` like a spectator, each frame telling it its own action_seq; its actions steer. Its
    connect counts against the session's connect rate and the transport CPU bound, as a spectator's."""
    try:
        daemon.spectators.admit(session.id, sum(len(s.audience) + s.audience.players()
                                                for s in daemon.sessions.values()))
        shared = await _shared_packer(daemon, session, media)
    except ProtocolError as exc:
        daemon.metrics.protocol_errors.labels(code=exc.code.value).inc()
        await refuse_socket(ws, exc)
        return
    c = daemon.config
    packer_ = shared
    welcome_session = dict(session.public) | {"role": "player", "player": access.seat}

    async def attach() -> PlayerPort:
        port = join_as_player(session, access, packer_, max_frames=c.spectator_queue_frames)
        # the welcome (sent next) says where the seat's seq stands once the seat's older connection
        # has ended: nothing of it can move it any more
        welcome_session["last_seq"] = seat_seq(session, port.player)
        return port

    conn = SpectatorConnection(
        StarletteWire(ws), attach, welcome_session,
        SpectatorOptions(limits=_limits(daemon, session), hello_timeout_s=c.hello_timeout_s,
                         stall_s=c.spectator_stall_s, inbound=daemon.inbound_limits()),
        on_error=daemon.count_protocol_error, on_send_cpu=daemon.spectators.send_meter())
    await conn.run()
