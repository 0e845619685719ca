"""WebRTC transport (aiortc): the gateway answering offers, one paced, shared-encoder video
stream per session, the `control`/`actions` data channels (docs/protocol.md "WebRTC specifics")."""

from transports.webrtc._hooks import PeerScope, peer_scope
from transports.webrtc.config import IceServer, WebRTCConfig
from transports.webrtc.gateway import WebRTCGateway

__all__ = ["IceServer", "PeerScope", "WebRTCConfig", "WebRTCGateway", "peer_scope"]
