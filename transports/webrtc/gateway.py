"""`POST /v1/sessions/{sid}/webrtc`: SDP offer in, answer out, one live peer per session.

The answering side adds its send-only video transceiver, with H.264 codec preferences, BEFORE
`setRemoteDescription` (aiortc only honours preferences on a transceiver that exists then),
and sets its local description inside `peer_scope` (local-only host candidates when
configured; RTP timestamps = session pts). Non-trickle: the answer carries every candidate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.exceptions import InternalError, InvalidAccessError, InvalidStateError, OperationError
from aiortc.rtcrtpparameters import RTCRtpCodecCapability

from protocols.errors import ErrorCode, ProtocolError
from transports.interface import SessionPort
from transports.webrtc._hooks import PeerScope, peer_scope
from transports.webrtc._liveness import RtcpWatch
from transports.webrtc._sdp import check_offer, keep_candidates
from transports.webrtc.config import WebRTCConfig
from transports.webrtc.peer import Peer
from transports.webrtc.stream import SessionStream, ViewerTrack

__all__ = ["AUDIENCE_CATCH_UP_FRAMES", "WebRTCGateway", "h264_preferences"]

logger = logging.getLogger(__name__)

# the spectators' and co-players' shared stream: the window of frames over which a hold on every
# frame counts as an offset to drop (transports/webrtc/_clock.py); 2 s at 16 frames/s
AUDIENCE_CATCH_UP_FRAMES = 32

# What aiortc raises on an offer it cannot negotiate; an AttributeError/TypeError/IndexError
# from inside it means a malformed offer got past parsing (e.g. a data channel m-line
# without its mid), not a bug of ours: refuse the offer, never answer with a 500.
_REFUSED_OFFER = (
    ValueError, KeyError, IndexError, TypeError, AttributeError, AssertionError, StopIteration, RuntimeError,
    InternalError, InvalidAccessError, InvalidStateError, OperationError,
)


def h264_preferences() -> list[RTCRtpCodecCapability]:
    """H.264 packetization-mode 1 (constrained baseline first) and its RTX, nothing else: the
    stream is encoded once, in H.264, for every viewer."""
    codecs = RTCRtpSender.getCapabilities("video").codecs
    h264 = [c for c in codecs if c.mimeType.lower() == "video/h264" and c.parameters.get("packetization-mode") == "1"]
    h264.sort(key=lambda c: c.parameters.get("profile-level-id") != "42e01f")
    return h264 + [c for c in codecs if c.mimeType.lower() == "video/rtx"]


class WebRTCGateway:
    """WebRTCGatewayProtocol over aiortc."""

    def __init__(self, config: WebRTCConfig | None = None, *, on_error: Callable[[str], None] | None = None) -> None:
        """`on_error`: called with the code of every error a peer's inbound reader makes (the
        daemon's protocol-error metric, as for a WebSocket)."""
        self.config = config or WebRTCConfig()
        self._on_error = on_error
        self._executor = ThreadPoolExecutor(self.config.encode_threads, thread_name_prefix="webrtc-encode")
        self._peers: dict[str, Peer] = {}
        self._audience: dict[str, SessionStream] = {}  # session -> its spectators' shared stream
        self._spectators: set[Peer] = set()

    def peer(self, session_id: str) -> Peer | None:
        return self._peers.get(session_id)

    def _ice_servers(self) -> list[RTCIceServer]:
        return [RTCIceServer(urls=s.urls, username=s.username, credential=s.credential) for s in self.config.ice_servers]

    async def answer(self, port: SessionPort, sdp: str, type_: str) -> tuple[str, str]:
        check_offer(sdp, type_)
        sid = port.session_id
        current = self._peers.get(sid)
        if current is not None and current.live:
            raise ProtocolError(
                ErrorCode.CONFLICT,
                "this session already has a live WebRTC peer; close it before offering again",
            )
        if current is not None:
            await current.close()
        hosts = self.config.host_addresses
        if hosts is not None:
            sdp = keep_candidates(sdp, hosts)
        pc = RTCPeerConnection(RTCConfiguration(iceServers=self._ice_servers()))
        track = ViewerTrack()
        stream = SessionStream(port, self._executor, crf=self.config.crf)
        liveness = RtcpWatch(self.config.viewer_silence_s)
        peer = Peer(port, pc, stream, track, self.config, on_closed=self._forget, liveness=liveness,
                    on_error=self._on_error)
        self._peers[sid] = peer
        try:
            transceiver = pc.addTransceiver(track, direction="sendonly")
            transceiver.setCodecPreferences(h264_preferences())
            # aiortc honours PLI/FIR only for frames it encodes itself; ours arrive encoded, so
            # a viewer's key frame request goes to the shared encoder (throttled there).
            transceiver.sender._send_keyframe = stream.request_keyframe  # type: ignore[method-assign]
            liveness.watch_sender(transceiver.sender)  # the viewer's RTCP is its heartbeat
            await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
            answer = await pc.createAnswer()
            with peer_scope(PeerScope(host_addresses=hosts, zero_rtp_origin=True)):
                await pc.setLocalDescription(answer)
        except _REFUSED_OFFER as exc:
            logger.info("webrtc %s: offer refused: %r", sid, exc)
            await peer.close()
            raise ProtocolError(ErrorCode.INVALID_FIELD, f"the offer cannot be answered: {exc}", field="sdp") from None
        peer.start()
        local = pc.localDescription
        logger.info("webrtc %s: answered", sid)
        return local.sdp, local.type

    async def answer_spectator(self, port: SessionPort, feed: SessionPort, sdp: str, type_: str, *,
                               outgoing: Callable[[Any], Any] | None = None) -> tuple[str, str]:
        """A spectator's (or a co-player's) offer: its peer is one more viewer of the session's
        spectator stream, which reads `feed` (the frames the owner got) and encodes each ONCE for
        all of them; a key frame starts its video. `port` takes its own messages (a spectator's
        replies, a co-player's actions). `outgoing`: what this viewer gets of each message the
        stream broadcasts (a co-player's `frames` carry its own action_seq)."""
        check_offer(sdp, type_)
        sid = port.session_id
        stream = self._audience.get(sid)
        if stream is None or stream.done.is_set() or stream.port is not feed:
            # its frames were paced for the owner already: the stream keeps their spacing, not an offset
            stream = self._audience[sid] = SessionStream(feed, self._executor, crf=self.config.crf,
                                                         catch_up_frames=AUDIENCE_CATCH_UP_FRAMES)
        hosts = self.config.host_addresses
        if hosts is not None:
            sdp = keep_candidates(sdp, hosts)
        pc = RTCPeerConnection(RTCConfiguration(iceServers=self._ice_servers()))
        track = ViewerTrack()
        liveness = RtcpWatch(self.config.viewer_silence_s)
        peer = Peer(port, pc, stream, track, self.config, on_closed=self._forget_spectator, liveness=liveness,
                    on_error=self._on_error, shared_stream=True, outgoing=outgoing)
        self._spectators.add(peer)
        bind = getattr(port, "bind", None)
        if bind is not None:  # its replies go to its own control channel; ending its member closes it
            bind(peer.send, peer.close_soon)
        liveness.on_gone = getattr(port, "dropped", None)  # a viewer gone silent: counted as dropped
        try:
            transceiver = pc.addTransceiver(track, direction="sendonly")
            transceiver.setCodecPreferences(h264_preferences())
            transceiver.sender._send_keyframe = stream.request_keyframe  # type: ignore[method-assign]
            liveness.watch_sender(transceiver.sender)
            await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
            answer = await pc.createAnswer()
            with peer_scope(PeerScope(host_addresses=hosts, zero_rtp_origin=True)):
                await pc.setLocalDescription(answer)
        except _REFUSED_OFFER as exc:
            logger.info("webrtc %s: spectator's offer refused: %r", sid, exc)
            await peer.close()
            raise ProtocolError(ErrorCode.INVALID_FIELD, f"the offer cannot be answered: {exc}", field="sdp") from None
        peer.start()
        local = pc.localDescription
        return local.sdp, local.type

    def _forget_spectator(self, peer: Peer) -> None:
        """A viewer's peer closed: the shared stream closes with its last viewer, unless a peer
        still being answered is to view it (it joins the stream only once answered: a new peer of
        a co-player's seat replacing the stream's one viewer must not be handed a closed stream)."""
        self._spectators.discard(peer)
        sid = peer.port.session_id
        stream = self._audience.get(sid)
        if stream is not None and stream is peer.stream and stream.viewers == 0 \
                and not any(other.stream is stream for other in self._spectators):
            del self._audience[sid]
            asyncio.get_running_loop().create_task(stream.close())

    def _forget(self, peer: Peer) -> None:
        if self._peers.get(peer.port.session_id) is peer:
            del self._peers[peer.port.session_id]

    async def close_session(self, session_id: str) -> None:
        peer = self._peers.get(session_id)
        if peer is not None:
            await peer.close()

    async def shutdown(self) -> None:
        for peer in [*self._peers.values(), *self._spectators]:
            await peer.close()
        for stream in list(self._audience.values()):
            await stream.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
