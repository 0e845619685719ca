"""What every public route reads and answers alike: the session token, the JSON body (at most
`MAX_BODY` bytes), an error as its HTTP body (`{"error": {...}}`, Retry-After for a refusal) and
a refused WebSocket (a fatal `error`, then close 4000 + the HTTP status)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from protocols.codec import encode
from protocols.errors import ErrorCode, ProtocolError
from protocols.http import ErrorBody, http_status_for, ws_close_code_for
from protocols.messages import Error

__all__ = ["MAX_BODY", "bearer_token", "error_response", "read_json", "refuse_socket"]

MAX_BODY = 64 * 1024


def error_response(exc: ProtocolError) -> JSONResponse:
    body = ErrorBody.of(exc)
    retry = body.retry_after_s
    headers = {"Retry-After": str(max(1, round(retry)))} if retry is not None else None
    return JSONResponse(body.to_json(), status_code=http_status_for(exc.code), headers=headers)


def bearer_token(request: Any) -> str | None:
    """The session token: `Authorization: Bearer ...`, else `?token=` (browsers' WebSockets)."""
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return str(auth[7:].strip())
    token = request.query_params.get("token")
    return str(token) if token else None


async def read_json(request: Request) -> Any:
    """The request's JSON body (None when empty); too_large / bad_message otherwise."""
    body = await request.body()
    if len(body) > MAX_BODY:
        raise ProtocolError(ErrorCode.TOO_LARGE, f"the body must be at most {MAX_BODY} bytes")
    try:
        return json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"the body is not JSON: {exc}") from exc


async def refuse_socket(ws: WebSocket, exc: ProtocolError) -> None:
    """Refuse an accepted WebSocket: an `error` (fatal), then close 4000 + the HTTP status (the
    message's start as the close reason: a close frame holds 123 bytes)."""
    with contextlib.suppress(RuntimeError, WebSocketDisconnect, OSError):
        await ws.send_bytes(encode(Error(code=exc.code.value, message=exc.message, fatal=True)))
        await ws.close(ws_close_code_for(exc.code), exc.message.encode()[:120].decode(errors="ignore"))
