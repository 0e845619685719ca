"""The error codes of docs/protocol.md and the one exception that carries them."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ErrorCode", "ProtocolError", "Refused"]


class ErrorCode(StrEnum):
    """Exactly the codes docs/protocol.md lists; their string values go on the wire."""

    BAD_MESSAGE = "bad_message"  # not msgpack / not a map (or not a JSON object)
    UNKNOWN_TYPE = "unknown_type"  # `t` missing, not a string, or not a known message type
    INVALID_FIELD = "invalid_field"  # a required field missing, wrong-typed or out of range
    TOO_LARGE = "too_large"  # the message is larger than the limit
    UNSUPPORTED_VERSION = "unsupported_version"  # hello/welcome with v != 1
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"  # a valid token whose role may not do this (a spectator's action, ...)
    NOT_FOUND = "not_found"
    CAPACITY = "capacity"
    RATE_LIMITED = "rate_limited"
    CONFLICT = "conflict"
    INTERNAL = "internal"
    ENGINE_FAULT = "engine_fault"
    STORE_UNAVAILABLE = "store_unavailable"


class ProtocolError(Exception):
    """A coded error: `code` says what kind, `message` says what to change, `field` names the
    offending field when there is one."""

    def __init__(self, code: ErrorCode, message: str, field: str | None = None) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.field = field

    def __repr__(self) -> str:
        return f"ProtocolError({self.code.value!r}, {self.message!r}, field={self.field!r})"


class Refused(ProtocolError):
    """A request refused for now (HTTP 503, WebSocket close 4503): `retry_after_s` says when to
    retry (None: waiting cannot help); `reason` is the error body's one-word cause
    (protocols.http.CAPACITY_REASONS)."""

    def __init__(self, code: ErrorCode, message: str, retry_after_s: float | None,
                 reason: str | None = None) -> None:
        super().__init__(code, message)
        self.retry_after_s = retry_after_s
        self.reason = reason
