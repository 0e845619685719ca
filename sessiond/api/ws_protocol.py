"""The server's WebSocket protocol: uvicorn's, except that a peer that reads nothing is let go.

uvicorn closes a WebSocket gracefully: its close frame is queued behind everything already
written, and the socket closes once the peer has read it all. A peer that reads nothing never
does, so the socket (and its buffers, up to the kernel's and 64 KiB of ours) would stay open for
as long as the peer keeps its end, after the app has long forgotten it. Three changes:

- **ping timeout**: when the keepalive ping rule fires (`viewer_ping_s`: a ping every that
  many seconds, its pong due within as many), the app hears it as a disconnect with code 1011
  and reason `keepalive ping timeout` (uvicorn tells the app nothing until the socket has
  closed, which for such a peer is never), and the socket is aborted.
- **close while stuck**: a close the app asks for while the socket's write buffer is over its
  high-water mark (the peer has not read what we wrote: it would not read our close frame either)
  aborts the socket at once instead of waiting for a flush.
- **at most `close_timeout` after the app**: whatever the reason, a socket still open that long
  after its app returned is aborted.

The effect is asserted end to end (tests/e2e/test_silent_spectators.py: a spectator that reads
nothing is no longer in the server's connections), so a uvicorn change that breaks it is caught.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

__all__ = ["PING_TIMEOUT_CODE", "PING_TIMEOUT_REASON", "LettingGoProtocol"]

PING_TIMEOUT_CODE = 1011
PING_TIMEOUT_REASON = "keepalive ping timeout"


class LettingGoProtocol(WebSocketsSansIOProtocol):
    def keepalive_timeout(self) -> None:
        if self.close_sent or self.transport.is_closing():
            return
        self.queue.put_nowait({"type": "websocket.disconnect", "code": PING_TIMEOUT_CODE,
                               "reason": PING_TIMEOUT_REASON})
        super().keepalive_timeout()
        self.transport.abort()

    async def send(self, message: Any) -> None:
        if (message.get("type") == "websocket.close" and self.handshake_complete and not self.close_sent
                and not self.disconnected and not self.writable.is_set()):
            self.queue.put_nowait({"type": "websocket.disconnect", "code": message.get("code", 1000),
                                   "reason": message.get("reason", "") or ""})
            self.close_sent = True
            self.transport.abort()
            return
        await super().send(message)

    async def run_asgi(self) -> None:
        await super().run_asgi()
        if not self.disconnected:
            self.loop.call_later(self.close_timeout, self._abort_if_open)

    def _abort_if_open(self) -> None:
        if not self.disconnected:
            self.transport.abort()
