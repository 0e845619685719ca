"""`Connection`: the state of one client connection to a session, one enum with guarded moves.

OPEN -> ENDING (the session told it to end: its queued control messages still go out, then it
ends) -> CLOSED; OPEN -> CLOSED. A closed connection never reopens; a reconnect is a new one."""

from __future__ import annotations

import enum

__all__ = ["Connection", "ConnectionState"]


class ConnectionState(enum.IntEnum):
    OPEN = 0
    ENDING = 1
    CLOSED = 2


class Connection:
    def __init__(self, media: str) -> None:
        self.media = media
        self.state = ConnectionState.OPEN

    @property
    def closed(self) -> bool:
        return self.state == ConnectionState.CLOSED

    @property
    def ending(self) -> bool:
        return self.state == ConnectionState.ENDING

    def end(self) -> None:
        """After its queued control messages (a fatal error), the connection ends."""
        if self.state == ConnectionState.OPEN:
            self.state = ConnectionState.ENDING

    def close(self) -> None:
        self.state = ConnectionState.CLOSED
