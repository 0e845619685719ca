"""`ConnectionPort`: one connection's view of a session (implements transports' SessionPort)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from transports.interface import OutChunk, OutFrame

if TYPE_CHECKING:
    from sessiond.session.session import Session

__all__ = ["ConnectionPort"]


class ConnectionPort:
    def __init__(self, session: Session, media: str) -> None:
        self._session = session
        self.session_id = session.id
        self.width = session.record.width
        self.height = session.record.height
        self.fps = session.record.fps
        self.media = media
        self.closed = False
        self.fatal = False  # set when the session tells this connection to end (after its control msgs)

    def generation(self) -> int:
        return self._session.out.generation

    @property
    def welcome_session(self) -> dict[str, Any]:
        return dict(self._session.public)

    async def submit(self, message: Any) -> None:
        if not self.closed:
            self._session.handle(message, self)

    async def next_output(self) -> OutChunk | Any | None:
        out = self._session.out
        while True:
            if self.closed or self._session.port is not self:
                return None
            item = out.take()
            if item is not None:
                return item
            if self.fatal:
                return None
            out.event.clear()
            await out.event.wait()

    def mark_sent(self, frame: OutFrame) -> None:
        if not self.closed and self._session.port is self:
            self._session.on_sent(frame)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._session.detach(self)
