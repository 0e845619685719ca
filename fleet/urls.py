"""Where a client reaches a session's media: URLs built on a server's base URL (a worker's, or the
gateway's in proxy mode), and the binding field that records a proxied session's origin."""

from __future__ import annotations

__all__ = ["ORIGIN_FIELD", "media_urls"]

ORIGIN_FIELD = "origin"  # binding extra: the gateway base URL a proxied session's client uses


def media_urls(base_url: str, session_id: str) -> dict[str, str]:
    """A session's WebSocket and WebRTC URLs on the server at `base_url`."""
    base = base_url.rstrip("/")
    ws_base = "ws" + base[4:] if base.startswith("http") else base
    return {"ws_url": f"{ws_base}/v1/sessions/{session_id}/ws", "webrtc_url": f"{base}/v1/sessions/{session_id}/webrtc"}
