"""Where a client reaches a session's media: URLs built on a server's base URL (a worker's, or the
gateway's in proxy mode), the binding field that records a proxied session's origin, and a share
link's or invite's page URL moved onto the gateway's origin (`on_origin`)."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["ORIGIN_FIELD", "media_urls", "on_origin"]

ORIGIN_FIELD = "origin"  # binding extra: the gateway base URL a proxied session's client uses


def media_urls(base_url: str, session_id: str) -> dict[str, str]:
    """A session's WebSocket and WebRTC URLs on the server at `base_url`."""
    base = base_url.rstrip("/")
    ws_base = "ws" + base[4:] if base.startswith("http") else base
    return {"ws_url": f"{ws_base}/v1/sessions/{session_id}/ws", "webrtc_url": f"{base}/v1/sessions/{session_id}/webrtc"}


def on_origin(origin: str, url: str) -> str:
    """`url` (a page the worker named: `.../watch.html?session=..&token=..`) with its scheme and host
    replaced by `origin`'s: the same page and query, served by the gateway. The path and query are the
    worker's own, so the daemon stays the one place that names its pages."""
    parts = urlsplit(url)
    return origin.rstrip("/") + (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
