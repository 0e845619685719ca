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
    Pong,
    Received,
    Resume,
)
from sessiond.errors import InvalidState
from sessiond.session.connection import Connection
from sessiond.session.session import Session

__all__ = ["DISPATCH", "dispatch", "handle", "handle_player"]


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


def handle_player(s: Session, player: int, message: ClientMessage, reply: Callable[[Any], None]) -> None:
    """One message from co-player `player`'s connection (player 0 is the owner: use `handle`).
    A co-player steers (actions, into its own timeline) and may ping; the session's requests
    (direct, interrupt, flush, pause, resume) stay the owner's: `forbidden`. `reply` is that
    connection's own control queue; `received` is its transport's business (its own window)."""
    if s.state.terminal:
        return
    s.touch()
    if isinstance(message, Action):
        problem = s.act_as(player, message)
        if problem is not None:
            reply(problem)
    elif isinstance(message, Ping):
        reply(Pong(re=message.id, ts=message.ts))
    elif isinstance(message, Hello):
        _refuse(s, reply, ErrorCode.CONFLICT, "hello was already received on this connection", None)
    elif isinstance(message, Received):
        return
    elif type(message) in DISPATCH:
        _refuse(s, reply, ErrorCode.FORBIDDEN, f"a co-player may not send {type(message).T}: only the session's "
                "owner directs, interrupts, flushes, pauses and resumes", getattr(message, "id", None))
    else:
        _refuse(s, reply, ErrorCode.UNKNOWN_TYPE, f"{type(message).__name__} is not a client message", None)


def _refuse(s: Session, reply: Callable[[Any], None], code: ErrorCode, message: str, re: int | None) -> None:
    s.env.metrics.protocol_errors.labels(code=code.value).inc()
    reply(Error(code=code.value, message=message, fatal=False, re=re))
