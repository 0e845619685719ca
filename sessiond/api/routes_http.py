"""The daemon's handlers of the public HTTP routes of docs/protocol.md (the table, the error
bodies and the token live in `httpapi`; JSON bodies; every failure is {"error": {...}})."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from httpapi import bearer_token, error_response, read_json
from protocols.errors import ErrorCode, ProtocolError
from protocols.http import CreateSessionRequest, InviteRequest
from protocols.messages import PROTOCOL_VERSION, Limits, Welcome
from sessiond.admission.build import objectives_of
from sessiond.admission.summary import summarize
from sessiond.api.share import viewers_create, viewers_list, viewers_revoke
from sessiond.grants import Access, Role, require
from sessiond.runtime.daemon import Daemon
from sessiond.runtime.directory import (
    create_session,
    delete_session,
    find_with_access,
    invite_player,
    open_for_connection,
    revoke_player,
    status_body,
)
from sessiond.session import Session, connect
from sessiond.session.players import join_rtc_player
from sessiond.session.spectators import join_rtc

__all__ = ["HANDLERS", "base_url", "metrics"]


def base_url(request: Any) -> str:
    return str(request.base_url).rstrip("/")


def _daemon(request: Request) -> Daemon:
    daemon: Daemon = request.app.state.daemon
    return daemon


async def create(request: Request) -> Response:
    daemon = _daemon(request)
    try:
        req = CreateSessionRequest.from_json(await read_json(request),
                                             max_prompt_chars=daemon.config.max_prompt_chars)
        resp = await create_session(daemon, req, base_url(request), request.headers.get("x-api-key"))
    except ProtocolError as exc:
        if exc.code == ErrorCode.CAPACITY:
            daemon.metrics.protocol_errors.labels(code=exc.code.value).inc()
        return error_response(exc)
    return JSONResponse(resp.to_json(), status_code=201)


async def status(request: Request) -> Response:
    """The session's status, for its owner and for any live grant's token (read-only)."""
    daemon = _daemon(request)
    try:
        found, _ = await find_with_access(daemon, request.path_params["sid"], bearer_token(request))
    except ProtocolError as exc:
        return error_response(exc)
    return JSONResponse(status_body(daemon, found))


async def delete(request: Request) -> Response:
    try:
        await delete_session(_daemon(request), request.path_params["sid"], bearer_token(request))
    except ProtocolError as exc:
        return error_response(exc)
    return Response(status_code=204)


async def players(request: Request) -> Response:
    """`POST /v1/sessions/{sid}/players` (extension, owner only): a co-play invite."""
    daemon = _daemon(request)
    try:
        req = InviteRequest.from_json(await read_json(request))
        body = await invite_player(daemon, request.path_params["sid"], bearer_token(request), req, base_url(request))
    except ProtocolError as exc:
        daemon.metrics.protocol_errors.labels(code=exc.code.value).inc()
        return error_response(exc)
    return JSONResponse(body, status_code=201)


async def players_revoke(request: Request) -> Response:
    """`DELETE /v1/sessions/{sid}/players/{grant_id}` (extension, owner only): the invite ends, its
    player's connection closes and whatever it held is let go."""
    daemon = _daemon(request)
    try:
        await revoke_player(daemon, request.path_params["sid"], bearer_token(request),
                            request.path_params["grant_id"])
    except ProtocolError as exc:
        return error_response(exc)
    return Response(status_code=204)


async def webrtc(request: Request) -> Response:
    daemon = _daemon(request)
    try:
        session, access = await open_for_connection(daemon, request.path_params["sid"], bearer_token(request),
                                                    base_url(request))
        if access.role not in (Role.VIEWER, Role.PLAYER):
            require(access, own=True, what="a WebRTC connection")
        offer = await read_json(request)
        if not isinstance(offer, dict) or not isinstance(offer.get("sdp"), str) \
                or not isinstance(offer.get("type"), str):
            raise ProtocolError(ErrorCode.INVALID_FIELD, "the body must be {sdp: str, type: \"offer\"}", "sdp")
        gateway = daemon.webrtc_gateway()
        if access.role == Role.VIEWER:
            return await _spectate_webrtc(daemon, session, access, gateway, offer)
        if access.role == Role.PLAYER:
            return await _play_webrtc(daemon, session, access, gateway, offer)
        port = connect(session, "webrtc")
        try:
            sdp, type_ = await gateway.answer(port, offer["sdp"], offer["type"])
        except ProtocolError:
            port.close()
            raise
    except ProtocolError as exc:
        return error_response(exc)
    return JSONResponse({"sdp": sdp, "type": type_})


async def _spectate_webrtc(daemon: Daemon, session: Session, access: Access, gateway: Any,
                           offer: dict[str, Any]) -> Response:
    """A viewer token's offer: admitted like a WebSocket spectator, then one more viewer of the
    session's shared spectator stream."""
    try:
        daemon.spectators.admit(session.id, sum(len(s.audience) for s in daemon.sessions.values()))
    except ProtocolError as exc:
        daemon.metrics.spectators_refused.labels(reason=exc.code.value).inc()
        raise
    port, feed = join_rtc(session, access, max_frames=daemon.config.spectator_queue_frames)
    try:
        sdp, type_ = await gateway.answer_spectator(port, feed, offer["sdp"], offer["type"])
    except ProtocolError:
        port.close()
        raise
    return JSONResponse({"sdp": sdp, "type": type_})


async def _play_webrtc(daemon: Daemon, session: Session, access: Access, gateway: Any,
                       offer: dict[str, Any]) -> Response:
    """A co-player's offer: admitted like its WebSocket (the connect rate, the transport CPU bound),
    then one more viewer of the session's shared WebRTC stream, its `frames` retold with its own
    action_seq, its actions steering (sessiond.session.players)."""
    try:
        daemon.spectators.admit(session.id, sum(len(s.audience) + s.audience.players()
                                                for s in daemon.sessions.values()))
    except ProtocolError as exc:
        daemon.metrics.protocol_errors.labels(code=exc.code.value).inc()
        raise
    c = daemon.config
    welcome = Welcome(v=PROTOCOL_VERSION, session=dict(session.public) | {"role": "player", "player": access.seat},
                      limits=Limits(max_message_bytes=c.max_message_bytes, max_actions_per_s=c.max_actions_per_s,
                                    max_prompt_chars=c.max_prompt_chars, window_frames=c.window_frames(session.record.fps)))
    port, feed = join_rtc_player(session, access, max_frames=c.spectator_queue_frames, welcome=welcome)
    try:
        sdp, type_ = await gateway.answer_spectator(port, feed, offer["sdp"], offer["type"], outgoing=port.outgoing)
    except ProtocolError:
        port.close()
        raise
    return JSONResponse({"sdp": sdp, "type": type_})


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    daemon = _daemon(request)
    if daemon.ready:
        return JSONResponse({"status": "ready", "model": daemon.model_name})
    why = daemon.warm_error or "warming up"
    return JSONResponse({"status": "not_ready", "reason": why}, status_code=503)


async def metrics(request: Request) -> Response:
    daemon = _daemon(request)
    daemon.update_gauges()
    return Response(daemon.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


async def capacity(request: Request) -> Response:
    daemon = _daemon(request)
    now = time.monotonic()
    body: dict[str, Any] = {}
    summary = summarize(daemon.admission.policy, now, daemon.cpu_share()) if daemon.admission is not None else None
    if summary is not None:  # first, the answer a person wants: can I get a session of each mode now?
        body.update(summary.to_json())
    body |= {
        "ready": daemon.ready, "model": daemon.model_name, "model_requested": daemon.config.model,
        "model_fallback": daemon.fallback,
        "sessions": {"total": len(daemon.sessions), "by_state": daemon.state_counts()},
        "store": {"kind": daemon.store.kind, "healthy": daemon.writer.healthy},
    }
    if daemon.host.loaded:
        info = daemon.host.info
        body["engine"] = {"device": info.device, "dtype": info.dtype, "width": info.width, "height": info.height,
                          "fps": info.fps, "frames_per_chunk": info.frames_per_chunk,
                          # a decoder stream's first chunk: fewer frames (a director's lead-in)
                          "first_chunk_frames": info.frames_per_chunk - info.lead_in_frames,
                          "kv_bytes_per_session": info.kv_bytes_per_session, "lead_chunks": daemon.lead_chunks,
                          # which attention kernel runs, and what warm-up measured when "auto" chose it
                          "attention": info.attention, "attention_timings_ms": dict(info.attention_timings_ms)}
        body["prompt_examples"] = list(info.prompt_examples)  # the served model's example prompts ([] if none)
        body["strategy"] = daemon.strategy_report()
    kv = daemon.scheduler.kv if daemon.scheduler is not None else None
    if kv is not None:
        body["kv"] = {"slab_bytes": kv.slab_bytes, "slabs_total": kv.slabs_total, "slabs_free": kv.slabs_free,
                      "slabs_in_use": kv.slabs_in_use, "slabs_offloaded": kv.slabs_offloaded}
    body["objectives"] = objectives_of(daemon.config).describe()
    # an extra field: spectators now, how many this machine serves in all, the measured shared packing
    body["spectators"] = daemon.spectators.describe(sum(len(s.audience) for s in daemon.sessions.values()))
    if daemon.admission is not None:
        body["admission"] = daemon.admission.policy.snapshot(now)
    return JSONResponse(body)


# the daemon's handler of each public route (httpapi.ROUTES) but the WebSocket (routes_ws)
HANDLERS = {"create": create, "status": status, "delete": delete, "webrtc": webrtc, "capacity": capacity,
            "healthz": healthz, "readyz": readyz, "viewers_create": viewers_create, "viewers_list": viewers_list,
            "viewers_revoke": viewers_revoke, "players": players,
            "players_revoke": players_revoke}
