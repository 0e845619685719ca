"""Creating, finding, resuming and deleting sessions (the HTTP API's and WebSocket's business
logic, framework-free). A session not in memory is looked up in the store: after a daemon
restart it is resumed from its durable record and continuation snapshot."""

from __future__ import annotations

import dataclasses
import secrets
import time
from typing import Any

from protocols.errors import ErrorCode, ProtocolError, Refused
from protocols.http import CreateSessionRequest, CreateSessionResponse, InviteRequest, SessionStatus
from protocols.timeline import pts_for
from sessiond.auth import hash_token, new_session_id, new_token
from sessiond.errors import StoreUnavailable
from sessiond.grants import Access, Role, authorize, issue, live_grants, require, revoke
from sessiond.logs import log_event
from sessiond.runtime.daemon import Daemon
from sessiond.session import Session
from sessiond.session.lifecycle import SessionState
from sessiond.store.base import SessionRecord

__all__ = ["create_session", "delete_session", "find_session", "find_with_access", "invite_player",
           "open_for_connection", "resume_session", "revoke_player", "status_body", "status_of"]

_STORE_RETRY_S = 2.0


def _unavailable(exc: StoreUnavailable) -> Refused:
    return Refused(ErrorCode.STORE_UNAVAILABLE, f"the session store is unavailable ({exc}); retry shortly",
                   _STORE_RETRY_S)


def _public(record: SessionRecord, base_url: str, prompt_examples: tuple[str, ...]) -> dict[str, Any]:
    ws_base = "ws" + base_url[4:] if base_url.startswith("http") else base_url
    sid = record.session_id
    public = {"session_id": sid, "mode": record.mode, "model": record.model, "width": record.width,
              "height": record.height, "fps": record.fps, "action_space": record.action_space,
              "ws_url": f"{ws_base}/v1/sessions/{sid}/ws", "webrtc_url": f"{base_url}/v1/sessions/{sid}/webrtc"}
    if prompt_examples:  # an extra field: the served model's example prompts
        public["prompt_examples"] = list(prompt_examples)
    if record.players > 1:  # an extra field: co-play seats, the owner included
        public["players"] = record.players
    return public


def _check_request(daemon: Daemon, req: CreateSessionRequest) -> None:
    info = daemon.info
    if req.model is not None and req.model != daemon.model_name:
        raise ProtocolError(ErrorCode.INVALID_FIELD, f"this daemon serves model {daemon.model_name!r}; "
                            f"leave `model` out or ask for it", "model")
    for name, want in (("width", info.width), ("height", info.height), ("fps", info.fps)):
        got = getattr(req, name)
        if got is not None and got != want:
            raise ProtocolError(ErrorCode.INVALID_FIELD, f"model {daemon.model_name!r} streams {name} {want}; "
                                f"leave `{name}` out or set it to {want}", name)


async def create_session(daemon: Daemon, req: CreateSessionRequest, base_url: str,
                         api_key: str | None = None) -> CreateSessionResponse:
    """`api_key`: the X-API-Key presented; checked (401) and counted (429) when the daemon has keys."""
    key = daemon.api_keys.check(api_key) if daemon.api_keys is not None else None
    daemon.check_ready()
    _check_request(daemon, req)
    sid = new_session_id()
    if key is None or daemon.api_keys is None:
        return await _create(daemon, req, base_url, sid, None)
    daemon.api_keys.claim(key, sid)
    try:
        return await _create(daemon, req, base_url, sid, key.name)
    except BaseException:
        daemon.api_keys.release(sid)
        raise


async def _create(daemon: Daemon, req: CreateSessionRequest, base_url: str, sid: str,
                  key_name: str | None) -> CreateSessionResponse:
    info = daemon.info
    token = new_token()
    now = time.time()
    record = SessionRecord(
        session_id=sid, mode=req.mode, model=daemon.model_name,
        seed=req.seed if req.seed is not None else secrets.randbelow(2**31), prompt=req.prompt or "",
        width=info.width, height=info.height, fps=info.fps, token_hash=hash_token(token), created_at=now,
        last_active_at=now, action_space=info.action_space.to_json(), api_key=key_name,
        players=req.players or 1)
    await daemon.admit(sid, req.mode, "create")
    try:
        await daemon.store.put_session(record)
    except StoreUnavailable as exc:
        daemon.release(sid)
        daemon.metrics.store_errors.inc()
        raise _unavailable(exc) from exc
    if not await daemon.host.open(sid, seed=record.seed, prompt=record.prompt):
        daemon.release(sid)
        await _forget(daemon, sid)
        raise Refused(ErrorCode.CAPACITY, "the KV pool is full; retry when a session closes", 5.0, "kv")
    public = _public(record, base_url, info.prompt_examples)
    session = Session(record, daemon.new_env(), public)
    daemon.sessions[sid] = session
    log_event("created", sid, mode=record.mode, model=record.model)
    session.set_state(SessionState.IDLE)
    daemon.writer.log(sid, "create", {"mode": record.mode, "prompt": record.prompt, "seed": record.seed,
                                      "model": record.model, **({"players": record.players} if record.players > 1 else {})},
                      at=now)  # when it was asked: the engine opens it between two steps
    return CreateSessionResponse(token=token, **public)


async def _forget(daemon: Daemon, sid: str) -> None:
    try:
        await daemon.store.delete_session(sid)
    except StoreUnavailable:
        daemon.metrics.store_errors.inc()


async def find_session(daemon: Daemon, sid: str, token: str | None, what: str = "this") -> Session | SessionRecord:
    """The live session, or its stored record when this daemon has not resumed it yet, for its
    owner: 404 when unknown, 401 when the token does not match, 403 for a grant's token."""
    found, access = await find_with_access(daemon, sid, token)
    require(access, own=True, what=what)
    return found


async def find_with_access(daemon: Daemon, sid: str, token: str | None) -> tuple[Session | SessionRecord, Access]:
    """The session (live or stored) and what `token` may do on it (sessiond.grants): 404 when
    unknown, 401 when the token is wrong, expired or revoked."""
    session = daemon.sessions.get(sid)
    if session is not None:
        record = session.record
    else:
        try:
            stored = await _stored(daemon, sid)
        except StoreUnavailable as exc:
            daemon.metrics.store_errors.inc()
            raise _unavailable(exc) from exc
        if stored is None:
            raise ProtocolError(ErrorCode.NOT_FOUND, f"no session {sid}")
        record = stored
    access = authorize(record.token_hash, record.grants, token, time.time())
    return (session if session is not None else record), access


async def _stored(daemon: Daemon, sid: str) -> SessionRecord | None:
    """The stored record, its position moved up to the durable one: after a crash the record
    (written every 0.1 s) may lag the position written before each chunk left."""
    record = await daemon.store.get_session(sid)
    if record is not None:
        position = await daemon.store.get_position(sid)
        if position is not None and position > record.frames_sent:
            return dataclasses.replace(record, frames_sent=position)
    return record


def status_of(found: Session | SessionRecord) -> SessionStatus:
    record = found.record if isinstance(found, Session) else found
    state = found.state.label if isinstance(found, Session) else record.state
    return SessionStatus(session_id=record.session_id, mode=record.mode, state=state,
                         frames_sent=record.frames_sent, pts=pts_for(record.frames_sent, record.fps),
                         segment=record.segment, created_at=record.created_at,
                         last_active_at=record.last_active_at)


def status_body(daemon: Daemon, found: Session | SessionRecord) -> dict[str, Any]:
    """`GET /v1/sessions/{sid}`'s body: the status and its extension fields, who watches and who
    steers now (`spectators`; `players`, the owner's connection counted) and, where admission
    measures one, the session's duty cycle (`admission`). A fleet worker's `status` control call
    answers this same body, so the gateway's status carries the same fields."""
    body = status_of(found).to_json()
    live = found if isinstance(found, Session) else None
    body["spectators"] = len(live.audience) if live is not None else 0
    body["players"] = (1 if live.connection is not None else 0) + live.audience.players() if live is not None else 0
    duty = daemon.admission.duty_of(body["session_id"]) if daemon.admission is not None else None
    if duty is not None:
        body["admission"] = duty
    return body


async def open_for_connection(daemon: Daemon, sid: str, token: str | None,
                              base_url: str) -> tuple[Session, Access]:
    """The live session a connection attaches to (resumed from the store when needed) and what
    its token may do there."""
    found, access = await find_with_access(daemon, sid, token)
    if isinstance(found, Session):
        if found.state.terminal:
            code = ErrorCode.ENGINE_FAULT if found.state == SessionState.FAILED else ErrorCode.NOT_FOUND
            raise ProtocolError(code, f"session {sid} has ended ({found.fault or found.state.label})")
        return found, access
    if daemon.owns is not None and not await daemon.owns(sid):
        raise Refused(ErrorCode.STORE_UNAVAILABLE, f"session {sid} is not served here; ask the gateway where it "
                      f"is (GET /v1/sessions/{sid} there)", _STORE_RETRY_S)
    return await resume_session(daemon, found, base_url), access


async def resume_session(daemon: Daemon, record: SessionRecord, base_url: str) -> Session:
    """The live session of `record`: resumed here from the store unless it already is live (one
    resume at a time per session). No token check: callers check it (or are the fleet's control)."""
    sid = record.session_id
    async with daemon.resume_lock(sid):
        live = daemon.sessions.get(sid)
        if live is not None:
            return live
        return await _resume(daemon, record, base_url)


async def _resume(daemon: Daemon, record: SessionRecord, base_url: str) -> Session:
    """A session this process has not seen: reopen it from its record and snapshot."""
    daemon.check_ready()
    if record.state in ("closed", "failed"):
        raise ProtocolError(ErrorCode.NOT_FOUND, f"session {record.session_id} has ended ({record.state})")
    if record.model != daemon.model_name:
        raise ProtocolError(ErrorCode.CONFLICT, f"session {record.session_id} runs model {record.model!r}; "
                            f"this daemon serves {daemon.model_name!r}")
    sid = record.session_id
    await daemon.admit(sid, record.mode, "resume")
    key = daemon.api_keys.by_name(record.api_key) if daemon.api_keys is not None and record.api_key else None
    if key is not None and daemon.api_keys is not None:
        daemon.api_keys.claim(key, sid, force=True)  # it counts again, whatever the count (it was admitted)
    try:
        snapshot = await daemon.store.get_snapshot(sid)
    except StoreUnavailable as exc:
        daemon.release(sid)
        raise _unavailable(exc) from exc
    if snapshot is not None:
        opened = await daemon.host.open_from_snapshot(sid, snapshot, seed=record.seed, prompt=record.prompt)
    else:
        opened = await daemon.host.open(sid, seed=record.seed, prompt=record.prompt)
    if not opened:
        daemon.release(sid)
        raise Refused(ErrorCode.CAPACITY, "the KV pool is full; retry when a session closes", 5.0, "kv")
    session = Session(record, daemon.new_env(), _public(record, base_url, daemon.info.prompt_examples),
                      restored=True)
    daemon.positions.reopen(sid)
    daemon.sessions[sid] = session
    log_event("resumed", sid, mode=record.mode, frames_sent=record.frames_sent, snapshot=snapshot is not None)
    session.set_state(SessionState.IDLE)
    return session


def _free_seat(record: SessionRecord, now: float) -> int:
    """The lowest seat 1..players-1 no live invite holds; `conflict` in words when none is free."""
    if record.mode != "world" or record.players <= 1:
        raise ProtocolError(ErrorCode.CONFLICT, f"session {record.session_id} is played by its owner alone: "
                            "invite players to a world session created with `players` above 1 (up to 8)")
    taken = {g.player for g in live_grants(record.grants, now, Role.PLAYER)}
    seat = next((k for k in range(1, record.players) if k not in taken), None)
    if seat is None:
        raise ProtocolError(ErrorCode.CONFLICT, f"all {record.players - 1} player seats of session "
                            f"{record.session_id} hold live invites; revoke one (DELETE /v1/sessions/"
                            f"{record.session_id}/players/{{grant_id}}) or let one expire first")
    return seat


async def invite_player(daemon: Daemon, sid: str, token: str | None, req: InviteRequest,
                        base_url: str) -> dict[str, Any]:
    """`POST /v1/sessions/{sid}/players` (owner only): a player invite on the lowest free seat
    (docs/protocol.md, Co-play); its token is in the answer only."""
    found, access = await find_with_access(daemon, sid, token)
    require(access, own=True, what="inviting players")
    now = time.time()
    record = found.record if isinstance(found, Session) else found
    seat = _free_seat(record, now)
    if isinstance(found, Session):
        grant, secret = found.invite_player(seat, now, req.ttl_s, req.label or "")
    else:  # only in the store (not resumed here): the invite goes into its record there
        grant, secret = issue(record.grants, Role.PLAYER, now, req.ttl_s, req.label or f"player {seat}", seat)
        try:
            await daemon.store.put_session(record)
        except StoreUnavailable as exc:
            daemon.metrics.store_errors.inc()
            raise _unavailable(exc) from exc
    log_event("player_invited", sid, player=seat, grant=grant.grant_id)
    public = _public(record, base_url, ())
    return {"grant_id": grant.grant_id, "role": Role.PLAYER.value, "token": secret, "expires_at": grant.expires_at,
            "player": seat, "play_url": f"{base_url}/world.html?session={sid}&token={secret}",
            "ws_url": public["ws_url"], "webrtc_url": public["webrtc_url"]}


async def revoke_player(daemon: Daemon, sid: str, token: str | None, grant_id: str) -> None:
    """`DELETE /v1/sessions/{sid}/players/{grant_id}` (owner only); not_found for no such invite."""
    found = await find_session(daemon, sid, token, "revoking an invite")
    record = found.record if isinstance(found, Session) else found
    if not any(g.grant_id == grant_id and g.role == Role.PLAYER.value for g in record.grants):
        raise ProtocolError(ErrorCode.NOT_FOUND, f"this session has no player invite {grant_id[:40]!r}")
    if isinstance(found, Session):
        found.revoke_grant(grant_id)
        return
    revoke(record.grants, grant_id, time.time())
    try:
        await daemon.store.put_session(record)
    except StoreUnavailable as exc:
        daemon.metrics.store_errors.inc()
        raise _unavailable(exc) from exc


async def delete_session(daemon: Daemon, sid: str, token: str | None) -> None:
    found = await find_session(daemon, sid, token, "DELETE")
    if isinstance(found, Session):
        found.close()
        await daemon.finish_close(sid, "deleted")
        return
    daemon.writer.log(sid, "close", {"reason": "deleted"})
    try:
        await daemon.store.delete_session(sid)
    except StoreUnavailable as exc:
        raise _unavailable(exc) from exc
