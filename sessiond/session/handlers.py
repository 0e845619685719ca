"""What each client message does to a session (PROTOCOL.md, client -> server)."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

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
from sessiond.session.actions import ActionInput
from sessiond.session.state import EngineOp, Op

if TYPE_CHECKING:
    from sessiond.session.session import Session

__all__ = ["check_action", "dispatch"]


def _error(session: Session, code: ErrorCode, message: str, re: int | None = None) -> None:
    session.env.metrics.protocol_errors.labels(code=code.value).inc()
    session.push_control(Error(code=code.value, message=message, fatal=False, re=re))


def check_action(space: dict[str, Any], msg: Action) -> tuple[str, str] | None:
    """(field, why) when the action does not fit the model's action space, else None."""
    allowed = set(space.get("keys", ()))
    bad = [k for k in msg.keys if k not in allowed]
    if bad:
        return "keys", f"keys {bad[:4]} are not in this model's action space {sorted(allowed)}"
    if msg.mouse is not None and not space.get("mouse", True):
        return "mouse", "this model takes no mouse input; leave `mouse` out"
    if msg.mouse is not None and not all(math.isfinite(v) for v in msg.mouse):
        return "mouse", "`mouse` must be finite numbers"
    n_buttons = int(space.get("buttons", 0))
    if msg.buttons is not None and msg.buttons >= (1 << n_buttons):
        return "buttons", f"`buttons` must be < {1 << n_buttons} (this model honours {n_buttons} buttons)"
    n_axes = int(space.get("axes", 0))
    if msg.axes is not None:
        if len(msg.axes) > n_axes:
            return "axes", f"`axes` may hold at most {n_axes} values for this model"
        if not all(math.isfinite(a) and -1.0 <= a <= 1.0 for a in msg.axes):
            return "axes", "`axes` values must be in [-1, 1]"
    return None


def _action(s: Session, msg: Action) -> None:
    problem = check_action(s.record.action_space, msg)
    if problem is not None:
        field, why = problem
        _error(s, ErrorCode.INVALID_FIELD, f"action {msg.seq}, field `{field}`: {why}")
        return
    verdict = s.actions.accept(ActionInput(msg.seq, tuple(msg.keys), msg.mouse, msg.buttons, msg.axes),
                               time.monotonic())
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
    s.env.log_event(s.id, "action", fields)


def _direct(s: Session, msg: Direct) -> None:
    fields: dict[str, Any] = {"prompt": msg.prompt}
    if msg.seconds is not None:
        fields["seconds"] = msg.seconds
    if msg.cut:
        fields["cut"] = True
    if msg.seed is not None:
        fields["seed"] = msg.seed
    s.env.log_event(s.id, "direct", fields)
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


def _interrupt(s: Session, msg: Interrupt) -> None:
    s.env.log_event(s.id, "interrupt", {})
    s.drop_output("interrupt")
    s.push_control(Ack(re=msg.id, pts=s.out.last_sent_pts()))
    if s.segment is not None:
        s.end_segment("interrupted", notify=True)
    s.stop_generation()
    s.clock.reanchor(time.monotonic(), s.out.total)
    s.settle()
    s.env.wake()


def _flush(s: Session, msg: Flush) -> None:
    s.env.log_event(s.id, "flush", {})
    s.drop_output("flush")
    s.push_control(Ack(re=msg.id, pts=s.out.last_sent_pts()))
    s.clock.reanchor(time.monotonic(), s.out.total)
    s.env.wake()


def _pause(s: Session, msg: Pause) -> None:
    s.env.log_event(s.id, "pause", {})
    if s.mode == "world":
        s.paused = True
        s.settle()
    s.push_control(Ack(re=msg.id))


def _resume(s: Session, msg: Resume) -> None:
    s.env.log_event(s.id, "resume", {})
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
    elif isinstance(msg, Interrupt):
        _interrupt(s, msg)
    elif isinstance(msg, Flush):
        _flush(s, msg)
    elif isinstance(msg, Pause):
        _pause(s, msg)
    elif isinstance(msg, Resume):
        _resume(s, msg)
    elif isinstance(msg, Hello):
        _error(s, ErrorCode.CONFLICT, "hello was already received on this connection")
    else:
        _error(s, ErrorCode.UNKNOWN_TYPE, f"{type(msg).__name__} is not a client message")
