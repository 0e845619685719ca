"""The media stack made ready before the first viewer comes, off the event loop.

PyAV, aiortc and their dependencies were imported on the first use of each: the first fMP4 viewer
imported PyAV and the first WebRTC offer imported aiortc, and an import runs holding the
interpreter, so the daemon's event loop stood still meanwhile (0.35 s on a quiet 2-core box; a
profile of a 50-spectator burst with three WebRTC viewers showed these imports as the event loop's
largest work, and that burst's first frames at 1.1-1.5 s against 0.4 s without WebRTC). The daemon
calls `warm_media_stack` once in a worker thread at start-up, before it says ready; each part that
is not installed is skipped and named (its routes then answer as they do in such a build).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

__all__ = ["MediaWarmth", "warm_media_stack"]


@dataclass
class MediaWarmth:
    """What warming did: seconds per part, and the parts this build lacks (part -> why)."""

    seconds: dict[str, float] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        done = ", ".join(f"{name} {s:.2f} s" for name, s in self.seconds.items()) or "nothing"
        lacks = "".join(f"; {name} unavailable ({why})" for name, why in self.missing.items())
        return done + lacks


def warm_media_stack(width: int, height: int, fps: int) -> MediaWarmth:
    """Import PyAV and open one H.264 encoder of the served size (what an fMP4 viewer's packer does
    first), then import aiortc, make one DTLS certificate (what a WebRTC offer does first) and run one
    loopback handshake between two peers of this process. Blocking: call it in a thread (the
    handshake runs its own event loop there)."""
    warmth = MediaWarmth()
    began = time.perf_counter()
    try:
        from transports.fmp4 import Fmp4Packer

        Fmp4Packer(width, height, fps)
        warmth.seconds["fmp4"] = time.perf_counter() - began
    except (ImportError, ValueError, OSError, RuntimeError) as exc:
        warmth.missing["fmp4"] = f"{type(exc).__name__}: {exc}"[:200]
    began = time.perf_counter()
    try:
        from aiortc.rtcdtlstransport import RTCCertificate

        import transports.webrtc  # noqa: F401  (the gateway and its streams)

        RTCCertificate.generateCertificate()
        warmth.seconds["webrtc"] = time.perf_counter() - began
    except ImportError as exc:
        warmth.missing["webrtc"] = f"{type(exc).__name__}: {exc}"[:200]
        return warmth
    began = time.perf_counter()
    try:
        asyncio.run(asyncio.wait_for(_loopback_handshake(), _HANDSHAKE_S))
        warmth.seconds["webrtc_handshake"] = time.perf_counter() - began
    except (TimeoutError, OSError, RuntimeError, ValueError) as exc:  # warm-up only: serving goes on
        warmth.missing["webrtc_handshake"] = f"{type(exc).__name__}: {exc}"[:200]
    return warmth


_HANDSHAKE_S = 5.0


async def _loopback_handshake() -> set[str]:
    """Two peers of this process on 127.0.0.1 agree on a video stream and a data channel and connect
    (ICE, DTLS, SCTP): every code path a viewer's first handshake runs, run once before any viewer
    (the first burst of 50 spectators paid it on two loaded cores: its WebRTC first frames 1.04-1.12 s
    against 0.68-0.87 s in later bursts). Returns the candidates' addresses (127.0.0.1 alone)."""
    from aiortc import RTCConfiguration, RTCPeerConnection

    from transports.webrtc._hooks import PeerScope, peer_scope

    loopback = PeerScope(host_addresses=("127.0.0.1",), zero_rtp_origin=False)  # never another interface
    offerer, answerer = (RTCPeerConnection(RTCConfiguration(iceServers=[])) for _ in range(2))
    try:
        offerer.addTransceiver("video", direction="recvonly")
        channel = offerer.createDataChannel("control")
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_open() -> None:
            if not opened.done():
                opened.set_result(None)

        channel.on("open", on_open)
        with peer_scope(loopback):
            await offerer.setLocalDescription(await offerer.createOffer())
        await answerer.setRemoteDescription(offerer.localDescription)
        with peer_scope(loopback):
            await answerer.setLocalDescription(await answerer.createAnswer())
        await offerer.setRemoteDescription(answerer.localDescription)
        await opened  # ICE, DTLS and SCTP are up once the data channel opens
        sdp = offerer.localDescription.sdp + answerer.localDescription.sdp
        return {line.split()[4] for line in sdp.splitlines() if line.startswith("a=candidate:")}
    finally:
        await offerer.close()
        await answerer.close()
