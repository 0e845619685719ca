"""ClientError and the helpers that turn HTTP and WebSocket failures into it (for client.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TypeVar
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx
from websockets.exceptions import ConnectionClosed

from .errors import ErrorCode, ProtocolError
from .http import ErrorBody

__all__ = [
    "CLIENT_CODES",
    "ClientError",
    "closed_error",
    "error_from_close",
    "error_from_response",
    "invalid_from_server",
    "parse_body",
    "ws_url_for",
]

T = TypeVar("T")

# Codes a client raises on its own, next to the ErrorCode values a server sends.
CLIENT_CODES = ("timeout", "disconnected")

_CODE_FOR_STATUS = {
    400: ErrorCode.BAD_MESSAGE,
    401: ErrorCode.UNAUTHORIZED,
    403: ErrorCode.UNAUTHORIZED,
    404: ErrorCode.NOT_FOUND,
    409: ErrorCode.CONFLICT,
    413: ErrorCode.TOO_LARGE,
    429: ErrorCode.RATE_LIMITED,
    503: ErrorCode.CAPACITY,
}


class ClientError(Exception):
    """A failure seen by the client: `code` is the server's ErrorCode value (or one of
    CLIENT_CODES), `status` the HTTP status when there was one."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        field: str | None = None,
        retry_after_s: float | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = str(code)
        self.message = message
        self.status = status
        self.field = field
        self.retry_after_s = retry_after_s
        self.reason = reason  # a refusal's one-word why (protocols.http.CAPACITY_REASONS), when the body had one


def _code_for_status(status: int) -> str:
    return _CODE_FOR_STATUS.get(status, ErrorCode.INTERNAL).value


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def error_from_response(
    status: int, body: bytes | bytearray | None, headers: Mapping[str, str]
) -> ClientError:
    """The ClientError of a failed HTTP exchange: from its error body when it has one, else
    from its status; retry_after_s from the body, else from the Retry-After header."""
    try:
        parsed = ErrorBody.from_json(json.loads(body or b""))
    except (ValueError, ProtocolError):
        text = (body or b"")[:200].decode("utf-8", "replace")
        return ClientError(
            _code_for_status(status),
            f"HTTP {status}: {text}",
            status=status,
            retry_after_s=_retry_after(headers),
        )
    retry = parsed.retry_after_s if parsed.retry_after_s is not None else _retry_after(headers)
    return ClientError(parsed.code, parsed.message, status=status, field=parsed.field, retry_after_s=retry,
                       reason=parsed.reason)


def error_from_close(code: int | None, reason: str) -> ClientError:
    """The ClientError of a WebSocket the server closed: 4000 + status names an ErrorCode."""
    if code is not None and 4000 <= code < 5000:
        return ClientError(_code_for_status(code - 4000), reason or f"closed with {code}", status=code - 4000)
    if code == 1009:
        return ClientError(ErrorCode.TOO_LARGE, reason or "a message exceeded the size limit")
    if code == 1011:
        return ClientError(ErrorCode.INTERNAL, reason or "the server failed")
    return ClientError("disconnected", f"the connection closed ({code}) {reason}".rstrip())


def ws_url_for(base_url: str, ws_url: str, media: str) -> str:
    """The WebSocket URL of a session: `ws_url` from the create response, absolute or relative
    to `base_url`, with http(s) turned into ws(s) and `media=` added to its query."""
    parts = urlsplit(ws_url if "://" in ws_url else base_url.rstrip("/") + "/" + ws_url.lstrip("/"))
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    query = "&".join(q for q in (parts.query, urlencode({"media": media})) if q)
    return urlunsplit((scheme, parts.netloc, parts.path, query, ""))


def closed_error(exc: ConnectionClosed) -> ClientError:
    """The ClientError of a connection that closed under a send or receive."""
    return error_from_close(exc.rcvd.code if exc.rcvd else None, exc.rcvd.reason if exc.rcvd else "")


def invalid_from_server(err: ProtocolError) -> ClientError:
    return ClientError(err.code, f"the server sent an invalid message: {err.message}", field=err.field)


def parse_body(parse: Callable[[object], T], response: httpx.Response) -> T:
    """A success body parsed by `parse` (a from_json), or a ClientError saying what was wrong."""
    try:
        return parse(response.json())
    except ValueError:
        raise ClientError(
            ErrorCode.BAD_MESSAGE,
            f"HTTP {response.status_code}: the body is not JSON",
            status=response.status_code,
        ) from None
    except ProtocolError as err:
        raise ClientError(
            err.code,
            f"the server's body is invalid: {err.message}",
            status=response.status_code,
            field=err.field,
        ) from None
