"""`ConnectionPort`: one connection's view of a session (implements transports' `SessionPort`).

`connect(session, media)` opens a connection to the session (taking over from any previous
one) and returns its port: messages in go to `inbound.handle`, output comes from the session's
output stream, frames put on the wire are reported back to the session."""

from __future__ import annotations

from typing import Any

from protocols.messages import ClientMessage
from sessiond.session.connection import Connection
from sessiond.session.inbound import handle
from sessiond.session.session import Session
from transports.interface import OutChunk, OutFrame

__all__ = ["ConnectionPort", "connect"]


def connect(session: Session, media: str) -> ConnectionPort:
    """Attach a new connection (closed at once when the session has ended)."""
    port = ConnectionPort(session, Connection(media))
    session.attach(port.connection)
    return port


class ConnectionPort:
    def __init__(self, session: Session, connection: Connection) -> None:
        self._session = session
        self.connection = connection
        self.session_id = session.id
        self.width = session.record.width
        self.height = session.record.height
        self.fps = session.record.fps
        self.media = connection.media

    @property
    def current(self) -> bool:
        """Open and still the session's connection (a newer one takes over)."""
        return not self.connection.closed and self._session.connection is self.connection

    def generation(self) -> int:
        return self._session.out.generation

    @property
    def welcome_session(self) -> dict[str, Any]:
        return dict(self._session.public)

    def submit(self, message: ClientMessage) -> None:
        if not self.connection.closed:
            handle(self._session, self.connection, message)

    async def next_output(self) -> OutChunk | Any | None:
        out = self._session.out
        while True:
            if not self.current:
                return None
            item = out.take()
            if isinstance(item, OutChunk):
                await self._session.reserve(item)
                return item if self.current else None
            if item is not None:
                self._session.handed(item)
                return item
            if self.connection.ending:
                return None
            out.event.clear()
            await out.event.wait()

    def mark_sent(self, frame: OutFrame) -> None:
        if self.current:
            self._session.on_sent(frame)

    def close(self) -> None:
        if not self.connection.closed:
            self.connection.close()
            self._session.detach(self.connection)
