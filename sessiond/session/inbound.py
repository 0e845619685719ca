"""Where every decoded client message from any transport enters a session: `handle` checks the
connection is the session's current one and dispatches the message by type to the Session
method that does it (docs/protocol.md, client -> server); a request the session's state cannot
take is answered with `conflict`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocols.errors import ErrorCode
from protocols.messages import (
    Action,
    ClientMessage,
    Direct,
    Error,
    Flush,
    Hello,
    Interrupt,
    Pause,
    Ping,
    Received,
    Resume,
)
from sessiond.errors import InvalidState
from sessiond.session.connection import Connection
from sessiond.session.session import Session

__all__ = ["DISPATCH", "dispatch", "handle"]


def _second_hello(s: Session, msg: Hello) -> None:
    s.refuse(ErrorCode.CONFLICT, "hello was already received on this connection")


# message type -> what the session does with it
DISPATCH: dict[type[Any], Callable[[Session, Any], None]] = {
    Action: Session.act,
    Received: Session.received,
    Ping: Session.ping,
    Direct: Session.direct,
    Interrupt: Session.interrupt,
    Flush: Session.flush,
    Pause: Session.pause,
    Resume: Session.resume,
    Hello: _second_hello,
}


def handle(s: Session, connection: Connection, message: ClientMessage) -> None:
    """One message from `connection` (ignored unless it is the session's current one)."""
    if connection is not s.connection or s.state.terminal:
        return
    s.touch()
    try:
        dispatch(s, message)
    except InvalidState as exc:  # a request this state cannot take: the client hears why
        s.env.metrics.protocol_errors.labels(code=ErrorCode.CONFLICT.value).inc()
        s.push_control(Error(code=ErrorCode.CONFLICT.value, fatal=False,
                             message=f"{type(message).__name__.lower()} cannot be done now: {exc}"))


def dispatch(s: Session, msg: Any) -> None:
    act = DISPATCH.get(type(msg))
    if act is None:
        s.refuse(ErrorCode.UNKNOWN_TYPE, f"{type(msg).__name__} is not a client message")
        return
    act(s, msg)
