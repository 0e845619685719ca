"""The worker's control calls (one JSON object in, one out, over the runtime's request plane) and
the dispatch of each call onto the `FleetDaemon` interface.

Requests: {"op": "create", "request": {...CreateSessionRequest}} | {"op": "resume", "session_id"}
| {"op": "status"|"close", "session_id", "token"} | {"op": "release", "session_id", "moved_to"?}
| {"op": "capacity"} | {"op": "drain"}.
Replies: {"ok": true, ...} or {"ok": false, "error": ErrorBody JSON ({"code", "message", ...})}."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fleet.daemon_port import DaemonCapacity, FleetDaemon
from fleet.errors import WorkerUnreachable
from fleet.placement import Admitted, Refusal
from protocols.errors import ErrorCode, ProtocolError
from protocols.http import CreateSessionRequest, ErrorBody

__all__ = ["OPS", "ControlHandler", "error_reply", "reply_error", "to_admission"]

logger = logging.getLogger(__name__)

OPS = ("create", "resume", "status", "close", "release", "capacity", "drain")


def error_reply(exc: ProtocolError) -> dict[str, Any]:
    return {"ok": False, **ErrorBody.of(exc).to_json()}


def _sid(request: dict[str, Any]) -> str:
    sid = request.get("session_id")
    if not isinstance(sid, str) or not sid:
        raise ProtocolError(ErrorCode.INVALID_FIELD, "`session_id` must be a non-empty string", "session_id")
    return sid


def _token(request: dict[str, Any]) -> str | None:
    token = request.get("token")
    return token if isinstance(token, str) else None


def _capacity_json(cap: DaemonCapacity) -> dict[str, Any]:
    return {"headroom": cap.headroom, "cost": cap.cost, "kv_free_sessions": cap.kv_free_sessions,
            "sessions": cap.sessions, "draining": cap.draining}


class ControlHandler:
    """Answers control calls for one worker by calling its daemon; never raises."""

    def __init__(self, daemon: FleetDaemon, base_url: str, *, on_drain: Callable[[list[str]], None] | None = None,
                 max_prompt_chars: int = 2000) -> None:
        self.daemon = daemon
        self.base_url = base_url
        self.max_prompt_chars = max_prompt_chars
        self._on_drain = on_drain

    async def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        try:
            if op == "create":
                req = CreateSessionRequest.from_json(request.get("request"), max_prompt_chars=self.max_prompt_chars)
                return {"ok": True, "response": (await self.daemon.create(req, self.base_url)).to_json()}
            if op == "resume":
                return {"ok": True, "response": await self.daemon.resume(_sid(request), self.base_url)}
            if op == "status":
                return {"ok": True, "status": await self.daemon.status(_sid(request), _token(request))}
            if op == "close":
                await self.daemon.close(_sid(request), _token(request))
                return {"ok": True}
            if op == "release":
                moved_to = request.get("moved_to")
                await self.daemon.release(_sid(request), moved_to if isinstance(moved_to, dict) else None)
                return {"ok": True}
            if op == "capacity":
                return {"ok": True, "capacity": _capacity_json(self.daemon.capacity())}
            if op == "drain":
                moving = await self.daemon.drain()
                if self._on_drain is not None:
                    self._on_drain(moving)
                return {"ok": True, "sessions": moving}
            raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"unknown control op {op!r}; expected one of {', '.join(OPS)}")
        except ProtocolError as exc:
            return error_reply(exc)
        except Exception as exc:  # a daemon fault answers as one; the worker keeps serving
            logger.exception("control op %s failed", op)
            return error_reply(ProtocolError(ErrorCode.INTERNAL, f"control op {op} failed: {exc}"))


def to_admission(worker: str, reply: dict[str, Any]) -> Admitted | Refusal:
    """A create/resume reply as placement reads it: admitted, or a refusal with its retry-after.
    A refusal without one (a bad request) is raised: asking other workers would not help."""
    if reply.get("ok"):
        response = reply.get("response") or {}
        return Admitted(str(response.get("session_id", "")), response)
    body = _error_body(reply, worker)
    if body.retry_after_s is None:
        raise _as_error(body)
    return Refusal(worker, body.retry_after_s, body.message, body.reason)


def reply_error(reply: dict[str, Any], worker: str) -> ProtocolError | None:
    """The ProtocolError a failed reply stands for (None when it succeeded)."""
    return None if reply.get("ok") else _as_error(_error_body(reply, worker))


def _error_body(reply: dict[str, Any], worker: str) -> ErrorBody:
    try:
        return ErrorBody.from_json(reply)
    except ProtocolError as exc:
        raise WorkerUnreachable(f"{worker} answered a malformed reply: {exc.message}") from exc


def _as_error(body: ErrorBody) -> ProtocolError:
    code = ErrorCode(body.code) if body.code in {c.value for c in ErrorCode} else ErrorCode.INTERNAL
    return ProtocolError(code, body.message, body.field)
