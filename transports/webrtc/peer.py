"""One browser's peer connection to a session: its data channels, its viewer track, its life.

Inbound (client-created channels): `control` carries every client message type, `actions`
(unordered, no retransmits) only `action`. Each message goes through the WebSocket's reader
(`transports.inbound.InboundReader`: the same limits, rate, abuse rule and metrics) and on to
`SessionPort.submit` in order of arrival: a bad message gets a coded `error` on `control` and is
dropped, and an abusive peer gets a fatal error and is closed. `hello` is optional here.
Outbound: everything the session stream broadcasts, on `control`. Messages sent before the
channel opens (the first chunk's `frames` metadata races the data channel's opening) are held,
at most `MAX_HELD_MESSAGES`, and sent in order once it opens; beyond that, and while the open
channel's buffer is over the limit (a client that never reads), they are dropped and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from aiortc import RTCDataChannel, RTCPeerConnection

from protocols.codec import encode
from transports.inbound import InboundReader
from transports.interface import SessionPort
from transports.webrtc._liveness import RtcpWatch
from transports.webrtc.config import WebRTCConfig
from transports.webrtc.stream import SessionStream, Viewer, ViewerTrack

__all__ = ["CONNECT_TIMEOUT_S", "MAX_HELD_MESSAGES", "Peer"]

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 20.0  # an answered peer that never connects is closed after this
MAX_HELD_MESSAGES = 64  # outbound messages held until `control` opens


class Peer:
    def __init__(
        self,
        port: SessionPort,
        pc: RTCPeerConnection,
        stream: SessionStream,
        track: ViewerTrack,
        config: WebRTCConfig,
        on_closed: Callable[[Peer], None],
        liveness: RtcpWatch | None = None,
        on_error: Callable[[str], None] | None = None,
        shared_stream: bool = False,
        outgoing: Callable[[Any], Any] | None = None,
    ) -> None:
        """`shared_stream`: the stream is also other peers' (a session's spectators and co-players):
        closing this peer only takes its viewer track off it. `outgoing`: what this viewer receives
        of each message the stream broadcasts (a co-player: `frames` with its own action_seq); its
        port's own replies are sent as they are."""
        self.port = port
        self.shared_stream = shared_stream
        self._outgoing = outgoing
        self.pc = pc
        self.stream = stream
        self.track = track
        self._config = config
        self._on_closed = on_closed
        self.liveness = liveness  # the viewer's RTCP: silence closes the peer (a viewer gone without a goodbye)
        if liveness is not None:
            track.on_sent = liveness.media_sent
        self._control: RTCDataChannel | None = None
        self._held: deque[Any] = deque()  # outbound messages waiting for `control` to open
        self._reader = InboundReader(config.inbound, hello_required=False, on_error=on_error)
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self.closed = asyncio.Event()
        self._connected = asyncio.Event()
        self.bad_messages = 0
        self.dropped_out = 0
        pc.on("datachannel", self._on_channel)
        pc.on("connectionstatechange", self._on_state)

    @property
    def live(self) -> bool:
        return not self._closing and self.pc.connectionState not in ("failed", "closed")

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.stream.add_viewer(Viewer(self.track, self.send if self._outgoing is None else self._send_mapped))
        self.stream.start()
        self._tasks.append(loop.create_task(self._watch()))

    def send(self, message: Any) -> None:
        channel = self._control
        if channel is None or channel.readyState != "open" or self._held:
            self._hold(message)
            return
        self._send_now(channel, message)

    def _send_mapped(self, message: Any) -> None:
        assert self._outgoing is not None
        self.send(self._outgoing(message))

    def _hold(self, message: Any) -> None:
        if self._closing or len(self._held) >= MAX_HELD_MESSAGES:
            self.dropped_out += 1
            return
        self._held.append(message)

    def _release_held(self) -> None:
        channel = self._control
        if channel is None or channel.readyState != "open":
            return
        while self._held:
            self._send_now(channel, self._held.popleft())

    def _send_now(self, channel: RTCDataChannel, message: Any) -> None:
        if channel.bufferedAmount > self._config.max_control_buffer:
            self.dropped_out += 1
            if self.dropped_out % 100 == 1:
                logger.warning("webrtc %s: control channel not draining, %d messages dropped",
                               self.port.session_id, self.dropped_out)
            return
        channel.send(encode(message))

    def _on_channel(self, channel: RTCDataChannel) -> None:
        if channel.label == "control":
            self._control = channel
            channel.on("message", lambda data: self._on_message(data, actions_only=False))
            channel.on("open", self._release_held)
            channel.on("close", self._close_soon)  # the viewer's goodbye: its session stops generating now
            self._release_held()  # a channel may arrive already open
        elif channel.label == "actions":
            channel.on("message", lambda data: self._on_message(data, actions_only=True))
        else:
            logger.info("webrtc %s: ignoring data channel %r", self.port.session_id, channel.label[:64])

    def close_soon(self) -> None:
        """Close this peer from a callback (a task does it)."""
        self._close_soon()

    def _close_soon(self) -> None:
        if not self._closing:
            self._tasks.append(asyncio.get_running_loop().create_task(self.close()))

    def _on_message(self, data: Any, actions_only: bool) -> None:
        if self._closing:
            return
        verdict = self._reader.read(data, actions_only=actions_only)
        if verdict.error is not None:
            self.bad_messages += 1
            self.send(verdict.error)
            if verdict.error.fatal:
                logger.warning("webrtc %s: %s after %d bad messages, closing the peer", self.port.session_id,
                               verdict.error.code, self.bad_messages)
                self._close_soon()
        elif verdict.message is not None:
            self.port.submit(verdict.message)

    async def _watch(self) -> None:
        """Close when the peer never connects, once the stream ends (session closed), or once the
        viewer leaves our media unanswered by RTCP (gone without a goodbye)."""
        try:
            await asyncio.wait_for(self._connected.wait(), CONNECT_TIMEOUT_S)
        except TimeoutError:
            logger.info("webrtc %s: peer did not connect within %.0f s", self.port.session_id, CONNECT_TIMEOUT_S)
        else:
            await self._until_done_or_silent()
        await self.close()

    async def _until_done_or_silent(self) -> None:
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self.stream.done.wait())}
        silent = asyncio.ensure_future(self.liveness.wait_gone()) if self.liveness is not None else None
        if silent is not None:
            waits.add(silent)
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
        if silent is not None and silent.done() and not silent.cancelled():
            logger.info("webrtc %s: no RTCP from the viewer for %.1f s of media; it is gone, closing the peer",
                        self.port.session_id, silent.result())

    async def _on_state(self) -> None:
        if self.pc.connectionState == "connected":
            self._connected.set()
        elif self.pc.connectionState in ("failed", "closed"):
            await self.close()

    async def close(self) -> None:
        if self._closing:
            await self.closed.wait()
            return
        self._closing = True
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.shared_stream:
            self.track.stop()  # its viewer leaves the shared stream ("ended")
            self.stream.remove_viewer_of(self.track)
        else:
            await self.stream.close()
        try:
            await self.pc.close()
        except (AttributeError, ConnectionError, RuntimeError) as exc:
            # aiortc cannot always tear down a half-negotiated connection (e.g. an offer
            # refused mid-way); its sockets are closed by then, so log and carry on.
            logger.info("webrtc %s: peer connection teardown: %r", self.port.session_id, exc)
        self.port.close()
        self._on_closed(self)
        self.closed.set()
