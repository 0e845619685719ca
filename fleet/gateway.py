"""The gateway: the public HTTP API of a single daemon in front of a fleet. A create is placed
(workers by headroom, each one's admission asked, the first that admits bound in the directory)
and answered with that worker's media URLs: by default media does not flow through the gateway.
With `proxy` (single-origin deployments) the answer names the gateway's own URLs instead, the
binding records that origin (a draining worker's `moved` names it too), and the gateway relays
each session's WebSocket and WebRTC offer to whichever worker the session is bound to when the
client connects (`fleet.proxy`). Status and delete go to the session's bound worker. Share links
and invites are made by the bound worker and come back naming the gateway's pages (which it
serves), so a link outlives the session's moves. The gateway holds no session state: any number
of them can serve one directory."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount
from starlette.websockets import WebSocket

from fleet.control import reply_error, to_admission
from fleet.directory import RedisDirectory, SessionDirectory
from fleet.errors import FleetError, NoWorkerAdmits, WorkerUnreachable
from fleet.failover import FailoverMonitor
from fleet.messages import Binding, WorkerCapacity
from fleet.placement import Admitted, Placement, Refusal
from fleet.proxy import forward_offer, forward_request, relay_socket
from fleet.runtime import ControlClient, RuntimeConfig, open_runtime
from fleet.tasks import raise_if_cancelled, stop
from fleet.urls import ORIGIN_FIELD, media_urls, on_origin
from httpapi import MAX_BODY, MEDIA, bearer_token, error_response, mount, read_json, refuse_socket
from httpapi.static import WebFiles
from protocols.errors import ErrorCode, ProtocolError, Refused
from protocols.http import CreateSessionRequest

__all__ = ["Gateway", "GatewayConfig", "RuntimeCalls", "WorkerCalls", "create_gateway_app", "media_urls",
           "sweep_forever"]

logger = logging.getLogger(__name__)

_MOVING_RETRY_S = 2.0
_PAGE_FIELDS = ("watch_url", "play_url")  # a share link's and an invite's page, moved onto the gateway


@dataclass(frozen=True)
class GatewayConfig:
    redis_url: str
    runtime: RuntimeConfig = field(default_factory=lambda: RuntimeConfig(file_dir="/tmp/sessiond-discovery"))
    web_dir: str | None = None
    max_asks: int = 8
    call_timeout_s: float = 10.0
    directory_prefix: str = "fleet"
    max_prompt_chars: int = 2000
    sweep_s: float = 1.0  # failover: seconds between sweeps for dead workers (0: no sweeps)
    orphan_scan_s: float = 30.0  # failover: seconds between scans for sessions of workers no record names
    proxy: bool = False  # relay media (WebSocket, WebRTC offers) through the gateway: one origin for clients
    public_url: str | None = None  # the base URL clients reach the gateway at (default: the request's): proxied
    # media URLs and, in either mode, share links' and invites' pages are built on it


class WorkerCalls(Protocol):
    """How the gateway reaches one worker's control endpoint."""

    async def call(self, worker: WorkerCapacity, request: dict[str, Any]) -> dict[str, Any]: ...


class RuntimeCalls:
    """Control calls through the Dynamo runtime, pinned to the worker's instance (direct routing)."""

    def __init__(self, control: ControlClient) -> None:
        self.control = control

    async def call(self, worker: WorkerCapacity, request: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.control.call(worker.instance_id, request)
        except Exception as exc:  # the runtime's errors for a dead, gone or slow instance
            raise WorkerUnreachable(f"{worker.worker} (instance {worker.instance_id}) failed: {exc}") from exc


class Gateway:
    def __init__(self, config: GatewayConfig, directory: SessionDirectory, calls: WorkerCalls) -> None:
        self.config = config
        self.directory = directory
        self.calls = calls
        self.placement = Placement(directory, max_asks=config.max_asks)

    def origin(self, request_base: str) -> str:
        """The base URL proxied media URLs and share links are built on: --public-url, else the one the
        request came to."""
        return (self.config.public_url or request_base).rstrip("/")

    async def create(self, req: CreateSessionRequest, request_base: str = "") -> dict[str, Any]:
        """Place the session; the worker's create response, with the gateway's media URLs in proxy mode."""
        async def ask(worker: WorkerCapacity) -> Admitted | Refusal:
            return to_admission(worker.worker, await self.calls.call(worker, {"op": "create", "request": req.to_json()}))

        try:
            placed = await self.placement.place(req.mode, ask)
        except NoWorkerAdmits as exc:
            raise Refused(ErrorCode.CAPACITY, str(exc), exc.retry_after_s, exc.reason) from exc
        if not self.config.proxy:
            return placed.response
        origin = self.origin(request_base)
        await self.directory.fenced_set(placed.binding, {ORIGIN_FIELD: origin})
        return {**placed.response, **media_urls(origin, placed.binding.session_id)}

    async def _bound(self, session_id: str) -> tuple[Binding, WorkerCapacity]:
        binding = await self.directory.lookup(session_id)
        if binding is None:
            raise ProtocolError(ErrorCode.NOT_FOUND, f"no session {session_id}")
        for attempt in range(2):
            workers = {w.worker: w for w in await self.placement.view()}
            if binding.worker in workers:
                return binding, workers[binding.worker]
            if attempt == 0:
                self.placement.invalidate()
        raise Refused(ErrorCode.STORE_UNAVAILABLE, f"session {session_id}'s worker {binding.worker} is not live; "
                      "the session is being moved, retry shortly", _MOVING_RETRY_S)

    async def _forward(self, session_id: str, request: dict[str, Any]) -> tuple[Binding, dict[str, Any]]:
        binding, worker = await self._bound(session_id)
        try:
            reply = await self.calls.call(worker, {**request, "session_id": session_id})
        except WorkerUnreachable as exc:
            raise Refused(ErrorCode.STORE_UNAVAILABLE, str(exc), _MOVING_RETRY_S) from exc
        error = reply_error(reply, worker.worker)
        if error is not None:
            raise error
        return binding, reply

    async def status(self, session_id: str, token: str | None, request_base: str = "") -> dict[str, Any]:
        """The bound worker's status of the session, with where to connect to it now (extension
        fields `ws_url`, `webrtc_url`: they change when the session moves; in proxy mode they are
        the gateway's)."""
        binding, reply = await self._forward(session_id, {"op": "status", "token": token})
        status = dict(reply["status"])
        if self.config.proxy:
            status.update(media_urls(self.origin(request_base), session_id))
            return status
        worker = {w.worker: w for w in await self.placement.view()}.get(binding.worker)
        if worker is not None:
            status.update(media_urls(worker.base_url, session_id))
        return status

    def relink(self, made: dict[str, Any], session_id: str, worker: WorkerCapacity,
               request_base: str) -> dict[str, Any]:
        """A new share link or invite as the worker answered it, moved onto the gateway (docs/protocol.md,
        Spectators): its page (`watch_url`, `play_url`) on the gateway's origin, which serves the web
        pages, so the link outlives a move (the page asks the gateway's `GET /v1/sessions/{sid}` where
        the session is before it connects); `ws_url` / `webrtc_url` on the gateway in proxy mode, else
        on the worker that holds the session now (what the status names)."""
        origin = self.origin(request_base)
        linked = dict(made)
        for key in _PAGE_FIELDS:
            if isinstance(linked.get(key), str):
                linked[key] = on_origin(origin, linked[key])
        linked.update(media_urls(origin if self.config.proxy else worker.base_url, session_id))
        return linked

    async def worker_of(self, session_id: str) -> WorkerCapacity:
        """The live worker the session is bound to now (proxy mode connects there)."""
        _, worker = await self._bound(session_id)
        return worker

    async def resume_on(self, worker: WorkerCapacity, session_id: str) -> Admitted | Refusal:
        return to_admission(worker.worker, await self.calls.call(worker, {"op": "resume", "session_id": session_id}))

    async def abandon_on(self, worker: WorkerCapacity, session_id: str) -> None:
        await self.calls.call(worker, {"op": "release", "session_id": session_id})

    def failover(self) -> FailoverMonitor:
        """A monitor that re-places the sessions of workers whose capacity records expired."""
        every = max(1, round(self.config.orphan_scan_s / self.config.sweep_s)) if self.config.sweep_s > 0 else 1
        return FailoverMonitor(self.directory, Placement(self.directory, max_asks=self.config.max_asks,
                                                         view_ttl_s=0.0), self.resume_on, self.abandon_on,
                               orphan_scan_every=every)

    async def close(self, session_id: str, token: str | None) -> None:
        binding, _ = await self._forward(session_id, {"op": "close", "token": token})
        with contextlib.suppress(FleetError):  # moved meanwhile: the new owner's binding stays
            await self.directory.release(binding)

    async def capacity(self) -> dict[str, Any]:
        workers = await self.directory.workers()
        modes = sorted({m for w in workers for m in w.headroom})
        return {"workers": [w.to_json() for w in workers],
                "totals": {"workers": len(workers), "sessions": sum(w.sessions for w in workers),
                           "draining": sum(w.draining for w in workers),
                           "kv_free_sessions": sum(w.kv_free_sessions for w in workers),
                           "headroom": {m: sum(max(0.0, w.headroom.get(m, 0.0)) for w in workers) for m in modes}}}


async def sweep_forever(monitor: FailoverMonitor, every_s: float) -> None:
    """Failover sweeps until cancelled (even when the Redis client swallows the cancellation); a
    sweep that fails (Redis down) is retried next time."""
    while True:
        try:
            report = await monitor.sweep()
        except FleetError as exc:
            raise_if_cancelled()  # the Redis client turned the cancellation into this error
            logger.warning("failover sweep failed: %s", exc)
        else:
            raise_if_cancelled()
            if report.moved or report.stranded:
                logger.info("failover: dead %s, moved %d, raced %d, stranded %d", report.dead, len(report.moved),
                            len(report.raced), len(report.stranded))
        await asyncio.sleep(every_s)


def _gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


async def _answer(work: Awaitable[Response]) -> Response:
    try:
        return await work
    except ProtocolError as exc:
        return error_response(exc)
    except FleetError as exc:  # the directory or a worker failed: the client retries shortly
        return error_response(Refused(ErrorCode.STORE_UNAVAILABLE, str(exc), _MOVING_RETRY_S))


async def _create(request: Request) -> Response:
    gateway = _gateway(request)
    req = CreateSessionRequest.from_json(await read_json(request), max_prompt_chars=gateway.config.max_prompt_chars)
    return JSONResponse(await gateway.create(req, _request_base(request)), status_code=201)


def _request_base(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host') or request.url.netloc}"


async def create(request: Request) -> Response:
    return await _answer(_create(request))


async def status(request: Request) -> Response:
    async def work() -> Response:
        return JSONResponse(await _gateway(request).status(request.path_params["sid"], bearer_token(request),
                                                           _request_base(request)))
    return await _answer(work())


async def delete(request: Request) -> Response:
    async def work() -> Response:
        await _gateway(request).close(request.path_params["sid"], bearer_token(request))
        return Response(status_code=204)
    return await _answer(work())


async def capacity(request: Request) -> Response:
    async def work() -> Response:
        return JSONResponse(await _gateway(request).capacity())
    return await _answer(work())


async def proxy_socket(ws: WebSocket) -> None:
    """Proxy mode: the session's WebSocket, relayed to the worker it is bound to now."""
    gateway: Gateway = ws.app.state.gateway
    sid = ws.path_params["sid"]
    try:
        worker = await gateway.worker_of(sid)
    except ProtocolError as exc:
        await ws.accept()
        await refuse_socket(ws, exc)
        return
    except FleetError as exc:
        await ws.accept()
        await refuse_socket(ws, Refused(ErrorCode.STORE_UNAVAILABLE, str(exc), _MOVING_RETRY_S))
        return
    upstream = media_urls(worker.base_url, sid)["ws_url"] + (f"?{ws.url.query}" if ws.url.query else "")
    await relay_socket(ws, upstream, gateway.config.call_timeout_s)


async def proxy_webrtc(request: Request) -> Response:
    """Proxy mode: the session's WebRTC offer, answered by the worker it is bound to now."""
    async def work() -> Response:
        gateway = _gateway(request)
        sid = request.path_params["sid"]
        worker = await gateway.worker_of(sid)
        body = await request.body()
        if len(body) > MAX_BODY:
            raise ProtocolError(ErrorCode.TOO_LARGE, f"the body must be at most {MAX_BODY} bytes")
        answer = await forward_offer(request.app.state.http, media_urls(worker.base_url, sid)["webrtc_url"], body,
                                     request.headers)
        return Response(answer.body, status_code=answer.status, media_type=answer.content_type)
    return await _answer(work())


async def share(request: Request) -> Response:
    """Share links and invites (`/v1/sessions/{sid}/viewers...`, `.../players...`): answered by the
    worker the session is bound to now; a new link's URLs are then moved onto the gateway
    (`Gateway.relink`), so the link keeps working after the session moves."""
    async def work() -> Response:
        gateway = _gateway(request)
        sid = request.path_params["sid"]
        worker = await gateway.worker_of(sid)
        body = await request.body()
        if len(body) > MAX_BODY:
            raise ProtocolError(ErrorCode.TOO_LARGE, f"the body must be at most {MAX_BODY} bytes")
        reply = await forward_request(request.app.state.http, request.method,
                                      worker.base_url.rstrip("/") + request.url.path, body, request.headers)
        if request.method == "POST" and reply.status == 201:
            with contextlib.suppress(ValueError):  # not JSON: passed on as the worker said it
                made = json.loads(reply.body)
                if isinstance(made, dict):
                    return JSONResponse(gateway.relink(made, sid, worker, _request_base(request)), status_code=201)
        return Response(reply.body, status_code=reply.status, media_type=reply.content_type)
    return await _answer(work())


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    try:
        live = [w for w in await _gateway(request).directory.workers() if not w.draining]
    except FleetError as exc:
        return JSONResponse({"status": "not_ready", "reason": str(exc)}, status_code=503)
    if not live:
        return JSONResponse({"status": "not_ready", "reason": "no live worker"}, status_code=503)
    return JSONResponse({"status": "ready", "workers": len(live)})


def create_gateway_app(config: GatewayConfig, *, calls: WorkerCalls | None = None,
                       directory: SessionDirectory | None = None) -> Starlette:
    """The gateway app. Without `calls`, its lifespan opens the Dynamo runtime (once per process)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        d = directory or RedisDirectory(config.redis_url, prefix=config.directory_prefix)
        runtime = None
        c = calls
        if c is None:
            runtime = open_runtime(config.runtime)
            c = RuntimeCalls(await ControlClient.open(runtime, config.runtime, config.call_timeout_s))
        gateway = app.state.gateway = Gateway(config, d, c)
        app.state.http = httpx.AsyncClient(timeout=config.call_timeout_s, trust_env=False)
        sweeper = asyncio.create_task(sweep_forever(gateway.failover(), config.sweep_s)) if config.sweep_s > 0 else None
        try:
            yield
        finally:
            if sweeper is not None:
                await stop(sweeper)
            await app.state.http.aclose()
            if runtime is not None:
                runtime.shutdown()
            if isinstance(d, RedisDirectory) and directory is None:
                await d.close()

    static = Path(config.web_dir) if config.web_dir else Path(__file__).resolve().parents[1] / "web"
    handlers: dict[str, Callable[..., Any]] = {
        "create": create, "status": status, "delete": delete, "capacity": capacity, "healthz": healthz,
        "readyz": readyz, "ws": proxy_socket, "webrtc": proxy_webrtc, "viewers_create": share,
        "viewers_list": share, "viewers_revoke": share,
        "players": share, "players_revoke": share}
    # the daemon's public surface; media routes only when relaying (else clients go to the worker's URLs)
    routes = mount(handlers, omit=() if config.proxy else MEDIA)
    routes.append(Mount("/", app=WebFiles(static), name="web"))
    return Starlette(routes=routes, lifespan=lifespan)
