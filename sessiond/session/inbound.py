"""What each client message does to a session (docs/protocol.md, client -> server): `handle` is
where every decoded message from any transport enters a session."""

from __future__ import annotations

import time
from typing import Any

from protocols.errors import ErrorCode
from protocols.messages import (
    Ack,
    Action,
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
from sessiond.session.jobs import EngineOp, Op
from sessiond.session.session import Session

__all__ = ["dispatch", "handle"]


def handle(s: Session, connection: Connection, message: Any) -> None:
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


def _error(session: Session, code: ErrorCode, message: str, re: int | None = None) -> None:
    session.env.metrics.protocol_errors.labels(code=code.value).inc()
    session.push_control(Error(code=code.value, message=message, fatal=False, re=re))


def _action(s: Session, msg: Action) -> None:
    problem = s.actions.check(msg)
    if problem is not None:
        field, why = problem
        _error(s, ErrorCode.INVALID_FIELD, f"action {msg.seq}, field `{field}`: {why}")
        return
    verdict = s.actions.accept(msg, time.monotonic())
    if verdict == "stale":
        return
    s.env.metrics.actions.inc()
    if verdict == "coalesced":
        s.env.metrics.actions_coalesced.inc()
        return
    fields: dict[str, Any] = {"seq": msg.seq, "keys": list(msg.keys)}
    if msg.mouse is not None:
        fields["mouse"] = list(msg.mouse)
    if msg.buttons is not None:
        fields["buttons"] = msg.buttons
    if msg.axes is not None:
        fields["axes"] = list(msg.axes)
    s.env.record_event(s.id, "action", fields)


def _direct(s: Session, msg: Direct) -> None:
    fields: dict[str, Any] = {"prompt": msg.prompt}
    if msg.seconds is not None:
        fields["seconds"] = msg.seconds
    if msg.cut:
        fields["cut"] = True
    if msg.seed is not None:
        fields["seed"] = msg.seed
    s.env.record_event(s.id, "direct", fields)
    s.push_control(Ack(re=msg.id))
    if s.mode == "world":
        s.prompt = s.record.prompt = msg.prompt
        s.ops.append(EngineOp(Op.SET_PROMPT, prompt=msg.prompt))
        s.env.persist(s.id)
        return
    s.wake_from_offload()
    if s.segment is not None:  # a re-direction replaces the running segment
        s.drop_output("interrupt")
        s.end_segment("interrupted", notify=True)
        s.stop_generation()
    elif msg.cut:
        s.drop_output("cut")
    if msg.cut:
        if msg.seed is not None:
            s.record.seed = msg.seed
        s.ops.append(EngineOp(Op.RESET, seed=s.record.seed, prompt=msg.prompt))
    elif msg.prompt != s.prompt:
        s.ops.append(EngineOp(Op.SET_PROMPT, prompt=msg.prompt))
    s.prompt = s.record.prompt = msg.prompt
    s.start_segment(msg.id, msg.seconds if msg.seconds is not None else s.env.default_segment_s)
    s.settle()
    s.env.wake()


def _take_back(s: Session, msg: Interrupt | Flush, *, stop: bool) -> None:
    """Flush: every unsent frame is dropped (acked with the last pts sent) and playback restarts
    from there; interrupt also ends the running segment and stops generation."""
    s.env.record_event(s.id, msg.T, {})
    s.drop_output(msg.T)
    s.push_control(Ack(re=msg.id, pts=s.out.last_sent_pts()))
    if stop:
        if s.segment is not None:
            s.end_segment("interrupted", notify=True)
        s.stop_generation()
    s.clock.reanchor(time.monotonic(), s.out.total)
    if stop:
        s.settle()
    s.env.wake()


def _pause(s: Session, msg: Pause) -> None:
    s.env.record_event(s.id, "pause", {})
    if s.mode == "world":
        s.paused = True
        s.settle()
    s.push_control(Ack(re=msg.id))


def _resume(s: Session, msg: Resume) -> None:
    s.env.record_event(s.id, "resume", {})
    if s.mode == "world" and s.paused:
        s.paused = False
        s.clock.reanchor(time.monotonic(), s.out.total)
        s.wake_from_offload()
        s.settle()
        s.env.wake()
    s.push_control(Ack(re=msg.id))


def dispatch(s: Session, msg: Any) -> None:
    if isinstance(msg, Action):
        _action(s, msg)
    elif isinstance(msg, Received):
        s.out.received(msg.idx)
    elif isinstance(msg, Ping):
        s.push_control(Pong(re=msg.id, ts=msg.ts))
    elif isinstance(msg, Direct):
        _direct(s, msg)
    elif isinstance(msg, Interrupt | Flush):
        _take_back(s, msg, stop=isinstance(msg, Interrupt))
    elif isinstance(msg, Pause):
        _pause(s, msg)
    elif isinstance(msg, Resume):
        _resume(s, msg)
    elif isinstance(msg, Hello):
        _error(s, ErrorCode.CONFLICT, "hello was already received on this connection")
    else:
        _error(s, ErrorCode.UNKNOWN_TYPE, f"{type(msg).__name__} is not a client message")
