"""Share links (docs/protocol.md, Spectators): the owner issues, lists and revokes viewer tokens.

`POST /v1/sessions/{sid}/viewers` `{"ttl_s"?, "label"?}` -> 201 the grant and its token (shown
once) with the URLs a spectator opens; `GET` the session's viewer grants with how many are
connected on each; `DELETE .../viewers/{grant_id}` -> 204, and every spectator connected with it
is closed at once. Owner token only (a viewer's: 403 forbidden). The grants live in the session's
record, written after every change (a live session through its writer, a stored one directly)."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from httpapi import bearer_token, error_response, read_json
from protocols.errors import ErrorCode, ProtocolError
from sessiond.errors import StoreUnavailable
from sessiond.grants import Grant, Role, issue, revoke
from sessiond.runtime.daemon import Daemon
from sessiond.runtime.directory import find_session
from sessiond.session import Session
from sessiond.store.base import SessionRecord

__all__ = ["DEFAULT_TTL_S", "MAX_LABEL_CHARS", "MAX_TTL_S", "viewers_create", "viewers_list", "viewers_revoke"]

DEFAULT_TTL_S = 3600.0
MAX_TTL_S = 7 * 24 * 3600.0
MAX_LABEL_CHARS = 200


def _daemon(request: Request) -> Daemon:
    daemon: Daemon = request.app.state.daemon
    return daemon


def _urls(request: Request, sid: str, token: str) -> dict[str, str]:
    base = str(request.base_url).rstrip("/")
    ws_base = "ws" + base[4:] if base.startswith("http") else base
    return {"watch_url": f"{base}/watch.html?session={sid}&token={token}",
            "ws_url": f"{ws_base}/v1/sessions/{sid}/ws", "webrtc_url": f"{base}/v1/sessions/{sid}/webrtc"}


def parse_share(body: Any) -> tuple[float, str]:
    """(ttl_s, label) of a create body; invalid_field naming the field."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ProtocolError(ErrorCode.BAD_MESSAGE, "the body must be a JSON object {ttl_s?, label?}")
    ttl = body.get("ttl_s", DEFAULT_TTL_S)
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= MAX_TTL_S:
        raise ProtocolError(ErrorCode.INVALID_FIELD, f"`ttl_s` must be seconds in (0, {MAX_TTL_S:.0f}] "
                            f"(7 days), got {str(ttl)[:40]}", "ttl_s")
    label = body.get("label", "")
    if not isinstance(label, str) or len(label) > MAX_LABEL_CHARS:
        raise ProtocolError(ErrorCode.INVALID_FIELD, f"`label` must be a string of at most {MAX_LABEL_CHARS} "
                            "characters", "label")
    unknown = sorted(set(body) - {"ttl_s", "label"})
    if unknown:
        raise ProtocolError(ErrorCode.INVALID_FIELD, f"unknown field `{str(unknown[0])[:40]}`; the fields are "
                            "ttl_s and label", str(unknown[0])[:40])
    return float(ttl), label


async def _store(daemon: Daemon, record: SessionRecord) -> None:
    """A session only in the store (not resumed here): its record is written now."""
    try:
        await daemon.store.put_session(record)
    except StoreUnavailable as exc:
        daemon.metrics.store_errors.inc()
        raise ProtocolError(ErrorCode.STORE_UNAVAILABLE, f"the session store is unavailable ({exc}); "
                            "retry shortly") from exc


async def viewers_create(request: Request) -> Response:
    daemon = _daemon(request)
    sid = request.path_params["sid"]
    try:
        found = await find_session(daemon, sid, bearer_token(request), "POST .../viewers")
        ttl_s, label = parse_share(await read_json(request))
        if isinstance(found, Session):
            grant, token = found.share(Role.VIEWER, ttl_s, label)
        else:
            grant, token = issue(found.grants, Role.VIEWER, time.time(), ttl_s, label)
            await _store(daemon, found)
    except ProtocolError as exc:
        return error_response(exc)
    body = {"grant_id": grant.grant_id, "role": grant.role, "token": token, "expires_at": grant.expires_at,
            "label": grant.label} | _urls(request, sid, token)
    return JSONResponse(body, status_code=201)


def _viewer(grant: Grant, connected: int) -> dict[str, Any]:
    return {"grant_id": grant.grant_id, "label": grant.label, "created_at": grant.created_at,
            "expires_at": grant.expires_at, "revoked": grant.revoked_at is not None, "connected": connected}


async def viewers_list(request: Request) -> Response:
    daemon = _daemon(request)
    try:
        found = await find_session(daemon, request.path_params["sid"], bearer_token(request), "GET .../viewers")
    except ProtocolError as exc:
        return error_response(exc)
    record = found.record if isinstance(found, Session) else found
    counts = found.audience.counts() if isinstance(found, Session) else {}
    viewers = [_viewer(g, counts.get(g.grant_id, 0)) for g in record.grants if g.role == Role.VIEWER.value]
    return JSONResponse({"viewers": viewers})


async def viewers_revoke(request: Request) -> Response:
    daemon = _daemon(request)
    grant_id = request.path_params["grant_id"]
    try:
        found = await find_session(daemon, request.path_params["sid"], bearer_token(request), "DELETE .../viewers")
        record = found.record if isinstance(found, Session) else found
        if not any(g.grant_id == grant_id and g.role == Role.VIEWER.value for g in record.grants):
            raise ProtocolError(ErrorCode.NOT_FOUND, f"this session has no viewer link {grant_id[:40]!r}")
        if isinstance(found, Session):
            found.revoke_grant(grant_id)
        else:
            revoke(found.grants, grant_id, time.time())
            await _store(daemon, found)
    except ProtocolError as exc:
        return error_response(exc)
    return Response(status_code=204)
