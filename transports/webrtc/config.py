"""Settings of the WebRTC gateway; bad values fail at construction, naming what to change."""

from __future__ import annotations

from dataclasses import dataclass, field

from transports.inbound import InboundLimits
from transports.webrtc._hooks import validate_addresses

__all__ = ["IceServer", "WebRTCConfig"]


@dataclass(frozen=True)
class IceServer:
    urls: str  # e.g. "stun:stun.example.org:3478" or "turn:turn.example.org:3478"
    username: str | None = None
    credential: str | None = None

    def __post_init__(self) -> None:
        if not self.urls.startswith(("stun:", "stuns:", "turn:", "turns:")):
            raise ValueError(f"ice server {self.urls!r}: the URL must start with stun:, stuns:, turn: or turns:")


@dataclass(frozen=True)
class WebRTCConfig:
    """`ice_servers`: none by default (loopback and LAN; aiortc would otherwise add a public
    STUN server and wait for it). `host_addresses`: local-only mode, e.g. ("127.0.0.1",): ICE
    offers host candidates on exactly these addresses and ignores the client's candidates on
    any other (`--webrtc-hosts`); None gathers on every non-loopback interface as usual."""

    ice_servers: tuple[IceServer, ...] = ()
    host_addresses: tuple[str, ...] | None = None
    # message size, prompt length, request rate and abuse: the WebSocket's reader and limits
    inbound: InboundLimits = field(default_factory=InboundLimits)
    crf: int = 23  # x264 quality of the shared encoder
    encode_threads: int = 2  # executor threads shared by every session's encoder
    max_control_buffer: int = 1 << 20  # bytes queued on a control channel before messages drop
    viewer_silence_s: float = 3.0  # media unanswered by RTCP this long: the viewer is gone, its peer closed

    def __post_init__(self) -> None:
        if self.host_addresses is not None:
            object.__setattr__(self, "host_addresses", validate_addresses(tuple(self.host_addresses)))
        if self.encode_threads < 1:
            raise ValueError(f"encode_threads {self.encode_threads}: must be at least 1")
        if not self.viewer_silence_s > 0:
            raise ValueError(f"viewer_silence_s {self.viewer_silence_s}: must be a positive number of seconds")
        if not 0 <= self.crf <= 51:
            raise ValueError(f"crf {self.crf}: must be between 0 and 51")
