"""The HTTP JSON bodies of docs/protocol.md and the status code of each error code."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ._fields import build, invalid, specs_of
from ._rules import MAX_INT, MAX_LABEL_CHARS, MAX_NAME_CHARS
from .errors import ErrorCode, ProtocolError, Refused
from .messages import MAX_PLAYERS

__all__ = [
    "CAPACITY_REASONS",
    "MAX_FPS",
    "MAX_SIDE",
    "MODES",
    "CreateSessionRequest",
    "CreateSessionResponse",
    "ErrorBody",
    "InviteRequest",
    "SessionStatus",
    "http_status_for",
    "ws_close_code_for",
]

MODES = ("world", "director")
MAX_SIDE = 8192  # width / height in pixels
MAX_FPS = 240

_HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.BAD_MESSAGE: 400,
    ErrorCode.UNKNOWN_TYPE: 400,
    ErrorCode.INVALID_FIELD: 400,
    ErrorCode.TOO_LARGE: 400,
    ErrorCode.UNSUPPORTED_VERSION: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.CONFLICT: 409,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.INTERNAL: 500,
    ErrorCode.ENGINE_FAULT: 500,
    ErrorCode.CAPACITY: 503,
    ErrorCode.STORE_UNAVAILABLE: 503,
}


def http_status_for(code: ErrorCode | str) -> int:
    """The HTTP status that carries `code`; an unknown code is a server fault (500)."""
    try:
        return _HTTP_STATUS[ErrorCode(code)]
    except ValueError:
        return 500


def ws_close_code_for(code: ErrorCode | str) -> int:
    """The WebSocket close code for a connection closed because of `code`: 4000 + its HTTP
    status (4401 unauthorized, 4404 not found, ...), in the application range of RFC 6455."""
    return 4000 + http_status_for(code)


def _object(obj: object, what: str) -> dict[str, Any]:
    if type(obj) is not dict:
        raise ProtocolError(
            ErrorCode.BAD_MESSAGE, f"the {what} must be a JSON object, got {type(obj).__name__}"
        )
    return obj


def _in_range(name: str, value: int | None, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        raise invalid(name, f"`{name}` must be in [{low}, {high}], got {value}")


def _json(obj: Any) -> dict[str, Any]:
    """The fields that are set; tuples as lists (what JSON and msgpack decode them to)."""
    out = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if value is not None:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


@dataclass(frozen=True)
class CreateSessionRequest:
    """`POST /v1/sessions` body."""

    mode: str  # "world" | "director"
    model: str | None = None
    prompt: str | None = None
    seed: int | None = None
    width: int | None = None
    height: int | None = None
    fps: int | None = None
    players: int | None = None  # extension (co-play): seats of a world session, the owner included (1..8)

    @classmethod
    def from_json(cls, obj: object, *, max_prompt_chars: int = 2000) -> CreateSessionRequest:
        req: CreateSessionRequest = build(cls, _object(obj, "create body"), specs=_SPECS[cls])
        if req.mode not in MODES:
            raise invalid("mode", f"`mode` must be one of {', '.join(MODES)}, got {req.mode[:32]!r}")
        if req.model is not None and not 0 < len(req.model) <= MAX_NAME_CHARS:
            raise invalid("model", f"`model` must be 1..{MAX_NAME_CHARS} characters")
        if req.prompt is not None and len(req.prompt) > max_prompt_chars:
            raise invalid(
                "prompt", f"`prompt` must be at most {max_prompt_chars} characters, got {len(req.prompt)}"
            )
        _in_range("seed", req.seed, 0, MAX_INT)
        _in_range("width", req.width, 1, MAX_SIDE)
        _in_range("height", req.height, 1, MAX_SIDE)
        _in_range("fps", req.fps, 1, MAX_FPS)
        _in_range("players", req.players, 1, MAX_PLAYERS)
        if req.players is not None and req.players > 1 and req.mode != "world":
            raise invalid("players", f"`players` above 1 needs a world session; a {req.mode} session is "
                          "steered by its owner alone (leave `players` out or set it to 1)")
        return req

    def to_json(self) -> dict[str, Any]:
        return _json(self)


@dataclass(frozen=True)
class CreateSessionResponse:
    """`201` body of `POST /v1/sessions`; `welcome.session` is this without `token`."""

    session_id: str
    token: str
    mode: str
    model: str
    width: int
    height: int
    fps: int
    action_space: dict[str, Any]  # engine.api.ActionSpace.to_json()
    ws_url: str
    webrtc_url: str
    # an extra field: prompts the served model renders well, best first; absent when it names none
    prompt_examples: tuple[str, ...] | None = None
    players: int | None = None  # extension (co-play): the seats asked for at create, when more than 1

    @classmethod
    def from_json(cls, obj: object) -> CreateSessionResponse:
        response: CreateSessionResponse = build(cls, _object(obj, "create response"), specs=_SPECS[cls])
        return response

    def to_json(self) -> dict[str, Any]:
        return _json(self)

    def public_json(self) -> dict[str, Any]:
        """What `welcome.session` carries: everything but the token."""
        return {k: v for k, v in _json(self).items() if k != "token"}


@dataclass(frozen=True)
class InviteRequest:
    """*Extension*: `POST /v1/sessions/{sid}/players` body (co-play invite); all optional."""

    ttl_s: float | None = None  # the invite expires this many seconds from now; absent: with the session
    label: str | None = None  # the player's name as the others see it in `presence`

    @classmethod
    def from_json(cls, obj: object) -> InviteRequest:
        if obj is None:
            return cls()
        req: InviteRequest = build(cls, _object(obj, "invite body"), specs=_SPECS[cls])
        if req.ttl_s is not None and not req.ttl_s > 0:
            raise invalid("ttl_s", f"`ttl_s` must be positive seconds, got {req.ttl_s}")
        if req.label is not None and len(req.label) > MAX_LABEL_CHARS:
            raise invalid("label", f"`label` must be at most {MAX_LABEL_CHARS} characters, got {len(req.label)}")
        return req


@dataclass(frozen=True)
class SessionStatus:
    """`200` body of `GET /v1/sessions/{sid}`; times are Unix seconds."""

    session_id: str
    mode: str
    state: str  # created | active | idle | offloaded | closed | failed
    frames_sent: int
    pts: int
    segment: int
    created_at: float
    last_active_at: float

    @classmethod
    def from_json(cls, obj: object) -> SessionStatus:
        status: SessionStatus = build(cls, _object(obj, "session status"), specs=_SPECS[cls])
        return status

    def to_json(self) -> dict[str, Any]:
        return _json(self)


# `reason` of a `capacity` refusal (extension): why, in one word. Clients accept other words too.
CAPACITY_REASONS = (
    "not_ready",     # the engine is still starting (or failed to): retry shortly
    "draining",      # this server is leaving its fleet: create through the gateway
    "max_sessions",  # the operator's session cap is reached
    "kv",            # the KV pool has no room for one more session
    "full",          # the sessions open now leave no room even when idle: retry once one closes
    "load",          # the objectives would not hold with one more session now
    "burst",         # the risk of concurrent demand would be over the stated risk
    "uncalibrated",  # the cost model has not measured this engine yet
    "spectators",    # a spectator's connect: spectators' CPU bound reached (sessiond/admission/audience.py)
    "queued",        # one-per-GPU: no place came free within the wait
    "never",         # this server can never serve one session of that mode (no Retry-After)
)


@dataclass(frozen=True)
class ErrorBody:
    """Every HTTP failure body: `{"error": {code, message, field?, retry_after_s?, reason?}}`.
    `reason` (extension) says in one word why a `capacity` refusal was made (CAPACITY_REASONS), so a
    client can tell "still starting" from "full" without reading the message."""

    code: str  # an ErrorCode value
    message: str
    field: str | None = None
    retry_after_s: float | None = None
    reason: str | None = None

    @classmethod
    def from_error(
        cls, err: ProtocolError, *, retry_after_s: float | None = None, reason: str | None = None,
    ) -> ErrorBody:
        return cls(err.code.value, err.message, err.field, retry_after_s, reason)

    @classmethod
    def of(cls, err: ProtocolError) -> ErrorBody:
        """The body of a raised error, with the `retry_after_s` and `reason` a refusal carries."""
        if not isinstance(err, Refused):
            return cls.from_error(err)
        retry = err.retry_after_s
        return cls.from_error(err, retry_after_s=None if retry is None else float(retry), reason=err.reason)

    @classmethod
    def from_json(cls, obj: object) -> ErrorBody:
        inner = _object(obj, "error body").get("error")
        if type(inner) is not dict:
            raise invalid("error", 'an error body is {"error": {code, message, field?, retry_after_s?}}')
        body: ErrorBody = build(cls, inner, prefix="error.", specs=_SPECS[cls])
        if body.retry_after_s is not None and body.retry_after_s < 0:
            raise invalid(
                "error.retry_after_s", f"`error.retry_after_s` must be >= 0, got {body.retry_after_s}"
            )
        return body

    def to_json(self) -> dict[str, Any]:
        return {"error": _json(self)}

    def status(self) -> int:
        return http_status_for(self.code)


_SPECS = {
    cls: specs_of(cls)
    for cls in (CreateSessionRequest, CreateSessionResponse, SessionStatus, ErrorBody, InviteRequest)
}
