"""One public HTTP surface: the daemon and the gateway mount the same route table, and answer the
same bad requests with the same error bodies (a real daemon and a real proxy-mode gateway, each
under uvicorn on loopback)."""

from __future__ import annotations

import time
from typing import Any

import httpx
import msgpack
import pytest
from starlette.applications import Starlette
from starlette.routing import Route, WebSocketRoute
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from fleet.gateway import GatewayConfig, create_gateway_app
from fleet.messages import WorkerCapacity
from fleet.sim.memdir import MemoryDirectory
from httpapi import MEDIA, ROUTES, mount
from protocols.errors import ErrorCode, Refused
from protocols.http import ErrorBody
from sessiond.api.app import create_app
from sessiond.config import ServeConfig
from tests.conftest import RunningDaemon, serving

UNKNOWN = "s_0000000000000000"


def _table(app: Starlette) -> set[tuple[str, tuple[str, ...]]]:
    """(path, methods) of every route of the app but its static files; () for a WebSocket."""
    out = set()
    for route in app.routes:
        if isinstance(route, WebSocketRoute):
            out.add((route.path, ()))
        elif isinstance(route, Route):
            out.add((route.path, tuple(sorted((route.methods or set()) - {"HEAD"}))))
    return out


def _gateway_app(proxy: bool) -> Starlette:
    return create_gateway_app(GatewayConfig(redis_url="redis://unused", sweep_s=0, proxy=proxy), calls=_NoCalls(),
                              directory=MemoryDirectory(time.monotonic, ttl_s=600))


class _NoCalls:
    async def call(self, worker: WorkerCapacity, request: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError(f"no bad request here reaches a worker, got {request}")


def test_the_daemon_and_the_gateway_mount_the_same_public_routes() -> None:
    public = {(spec.path, spec.methods) for spec in ROUTES}
    daemon = create_app(ServeConfig.from_mapping({"model": "tiny"}))
    assert _table(daemon) == public | {("/metrics", ("GET",))}  # the daemon's own Prometheus endpoint
    assert _table(_gateway_app(proxy=True)) == public
    assert _table(_gateway_app(proxy=False)) == {(s.path, s.methods) for s in ROUTES if s.name not in MEDIA}


def test_mount_names_a_missing_or_unknown_handler() -> None:
    async def handler() -> None:
        return None

    with pytest.raises(ValueError, match=r"public routes \['ws'\] have no handler"):
        mount({spec.name: handler for spec in ROUTES if spec.name != "ws"})
    with pytest.raises(ValueError, match=r"no public route is named \['teleport'\]"):
        mount({"teleport": handler})


def test_a_refusal_carries_retry_after_and_reason_into_its_body() -> None:
    body = ErrorBody.of(Refused(ErrorCode.CAPACITY, "full", 5, "max_sessions"))
    assert body.to_json() == {"error": {"code": "capacity", "message": "full", "retry_after_s": 5.0,
                                        "reason": "max_sessions"}}


BAD_REQUESTS = [
    pytest.param("POST", "/v1/sessions", b"{not json", id="create-body-not-json"),
    pytest.param("POST", "/v1/sessions", b"{" + b" " * 70_000 + b"}", id="create-body-over-64-KiB"),
    pytest.param("POST", "/v1/sessions", b'{"mode": "chess"}', id="create-unknown-mode"),
    pytest.param("POST", "/v1/sessions", b'{"mode": "world", "prompt": "' + b"x" * 2001 + b'"}',
                 id="create-prompt-too-long"),
    pytest.param("POST", "/v1/sessions", b'{"mode": "world", "seed": -1}', id="create-seed-out-of-range"),
    pytest.param("GET", f"/v1/sessions/{UNKNOWN}", b"", id="status-unknown-session"),
    pytest.param("DELETE", f"/v1/sessions/{UNKNOWN}", b"", id="delete-unknown-session"),
    pytest.param("POST", f"/v1/sessions/{UNKNOWN}/webrtc", b'{"sdp": "v=0", "type": "offer"}',
                 id="webrtc-offer-for-an-unknown-session"),
]


@pytest.mark.parametrize(("method", "path", "body"), BAD_REQUESTS)
async def test_a_bad_request_gets_the_same_error_body_from_the_daemon_and_the_gateway(
        daemon: RunningDaemon, method: str, path: str, body: bytes) -> None:
    async with serving(_gateway_app(proxy=True)) as gateway, httpx.AsyncClient(timeout=10) as http:
        answers = []
        for base in (daemon.url, gateway):
            r = await http.request(method, base + path, content=body, headers={"authorization": "Bearer nope"})
            answers.append((r.status_code, r.headers.get("retry-after"), r.json()))
    assert answers[0] == answers[1]
    status, _, error = answers[0]
    assert status in (400, 404) and set(error) == {"error"}


async def test_a_websocket_to_an_unknown_session_is_refused_alike(daemon: RunningDaemon) -> None:
    async with serving(_gateway_app(proxy=True)) as gateway:
        refusals = []
        for base in (daemon.url, gateway):
            ws_url = "ws" + base[4:] + f"/v1/sessions/{UNKNOWN}/ws?media=raw&token=nope"
            async with connect(ws_url, proxy=None) as ws:
                error = msgpack.unpackb(await ws.recv())
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.recv()
            assert closed.value.rcvd is not None
            refusals.append((error, closed.value.rcvd.code, closed.value.rcvd.reason))
    assert refusals[0] == refusals[1]
    assert refusals[0] == ({"t": "error", "code": "not_found", "message": f"no session {UNKNOWN}", "fatal": True},
                           4404, f"no session {UNKNOWN}")
