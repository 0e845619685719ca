"""An aiortc client for loopback tests: the browser's side of docs/protocol.md's WebRTC section
(non-trickle offer, receive-only video, `control` and `actions` channels), on 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import av
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from protocols.codec import decode, encode
from transports.webrtc import PeerScope, peer_scope

LOOPBACK = ("127.0.0.1",)


class LoopbackClient:
    def __init__(self) -> None:
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.pc.addTransceiver("video", direction="recvonly")
        self.control = self.pc.createDataChannel("control")
        self.actions = self.pc.createDataChannel("actions", ordered=False, maxRetransmits=0)
        self.messages: asyncio.Queue[Any] = asyncio.Queue()
        self.frames: asyncio.Queue[av.VideoFrame] = asyncio.Queue()
        self.rtp_timestamps: list[int] = []
        self.control_open = asyncio.Event()
        self.actions_open = asyncio.Event()
        self.control.on("open", self.control_open.set)
        self.actions.on("open", self.actions_open.set)
        self.control.on("message", lambda data: self.messages.put_nowait(decode(data, expect="server")))
        self.pc.on("track", self._on_track)
        self._reader: asyncio.Task[None] | None = None

    def _on_track(self, track: Any) -> None:
        receiver = next(t.receiver for t in self.pc.getTransceivers() if t.receiver.track is track)
        original = receiver._handle_rtp_packet

        async def record(packet: Any, arrival_time_ms: int) -> None:
            if not self.rtp_timestamps or self.rtp_timestamps[-1] != packet.timestamp:
                self.rtp_timestamps.append(packet.timestamp)
            await original(packet, arrival_time_ms)

        receiver._handle_rtp_packet = record  # type: ignore[method-assign]

        async def read() -> None:
            with contextlib.suppress(MediaStreamError):
                while True:
                    self.frames.put_nowait(await track.recv())

        self._reader = asyncio.get_running_loop().create_task(read())

    async def offer(self) -> str:
        offer = await self.pc.createOffer()
        with peer_scope(PeerScope(host_addresses=LOOPBACK, zero_rtp_origin=False)):
            await self.pc.setLocalDescription(offer)
        return self.pc.localDescription.sdp

    async def accept(self, sdp: str, type_: str) -> None:
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type=type_))

    async def channels_open(self, timeout: float) -> None:
        """Both data channels open: the two open one after the other, and a message sent on `actions`
        before its own open raises (aiortc's InvalidStateError) even when `control` is already open."""
        await asyncio.wait_for(asyncio.gather(self.control_open.wait(), self.actions_open.wait()), timeout)

    def send(self, message: Any, channel: str = "control") -> None:
        (self.control if channel == "control" else self.actions).send(encode(message))

    async def next_message(self, kind: type, timeout: float = 10.0) -> Any:
        while True:
            message = await asyncio.wait_for(self.messages.get(), timeout)
            if isinstance(message, kind):
                return message

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        await self.pc.close()
