"""The gateway's proxy mode in one process: a `--proxy` gateway app (stubbed control calls, the
in-memory directory) and a stand-in worker app, each under uvicorn on loopback. Create and status
name the gateway; the binding records the origin; WebSocket messages go both ways unchanged; the
worker's close code and reason reach the client; a client's close reaches the worker; a worker
that does not answer is a 4503; a WebRTC offer and its refusal pass through as they were."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from fleet.gateway import GatewayConfig, create_gateway_app
from fleet.messages import WorkerCapacity
from fleet.sim.memdir import MemoryDirectory
from fleet.urls import media_urls
from protocols.codec import decode
from protocols.messages import Error
from tests.conftest import find_free_port, serving

SID = "s_proxy1"


class Worker:
    """The stand-in worker: echoes each message with a prefix; `close <code>` closes with that code."""

    def __init__(self) -> None:
        self.client_closed: list[int] = []
        self.headers: list[dict[str, str]] = []

    async def socket(self, ws: WebSocket) -> None:
        self.headers.append({k: v for k, v in ws.headers.items() if k in ("authorization", "x-api-key")})
        await ws.accept()
        await ws.send_text(f"query {ws.url.query}")
        while True:
            try:
                message = await ws.receive()
            except WebSocketDisconnect as exc:
                self.client_closed.append(exc.code)
                return
            if message["type"] == "websocket.disconnect":
                self.client_closed.append(int(message.get("code") or 1000))
                return
            if message.get("bytes") is not None:
                await ws.send_bytes(b"echo " + message["bytes"])
            elif message["text"].startswith("close "):
                await ws.close(int(message["text"].split()[1]), "going elsewhere")
                return
            else:
                await ws.send_text("echo " + message["text"])

    async def webrtc(self, request: Request) -> Response:
        if request.headers.get("authorization") != "Bearer good":
            return JSONResponse({"error": {"code": "unauthorized", "message": "bad token"}}, status_code=401)
        offer = json.loads(await request.body())
        return JSONResponse({"sdp": "answer to " + offer["sdp"], "type": "answer"})

    def app(self) -> Starlette:
        return Starlette(routes=[WebSocketRoute("/v1/sessions/{sid}/ws", self.socket),
                                 Route("/v1/sessions/{sid}/webrtc", self.webrtc, methods=["POST"])])


class Calls:
    """Control calls answered as a worker at `base` would."""

    def __init__(self, base: str) -> None:
        self.base = base

    async def call(self, worker: WorkerCapacity, request: dict[str, Any]) -> dict[str, Any]:
        if request["op"] == "create":
            return {"ok": True, "response": {"session_id": SID, "token": "good", **media_urls(self.base, SID)}}
        return {"ok": True, "status": {"session_id": request["session_id"], "state": "active"}}


@contextlib.asynccontextmanager
async def _fleet(worker: Worker, worker_url: str | None = None) -> AsyncIterator[tuple[str, MemoryDirectory]]:
    directory = MemoryDirectory(time.monotonic, ttl_s=600)
    async with serving(worker.app()) as served:
        base = worker_url or served
        await directory.publish(WorkerCapacity(worker="h/cpu-0", instance_id=1, base_url=base,
                                               headroom={"world": 1.0}, cost={"world": 0.1}, kv_free_sessions=4,
                                               sessions=0))
        config = GatewayConfig(redis_url="redis://unused", sweep_s=0, proxy=True)
        async with serving(create_gateway_app(config, calls=Calls(base), directory=directory)) as gw:
            yield gw, directory


async def test_create_status_and_websocket_go_through_the_gateway() -> None:
    worker = Worker()
    async with _fleet(worker) as (gw, directory), httpx.AsyncClient(timeout=10) as http:
        host = gw.split("//")[1]
        created = (await http.post(f"{gw}/v1/sessions", json={"mode": "world"})).json()
        assert (created["ws_url"], created["webrtc_url"]) == (f"ws://{host}/v1/sessions/{SID}/ws",
                                                              f"{gw}/v1/sessions/{SID}/webrtc")
        binding = await directory.lookup(SID)
        assert binding is not None and binding.extra == {"origin": gw}
        status = (await http.get(f"{gw}/v1/sessions/{SID}", headers={"authorization": "Bearer good"})).json()
        assert (status["state"], status["ws_url"]) == ("active", created["ws_url"])

        async with connect(created["ws_url"] + "?media=raw&token=good", additional_headers={
                "authorization": "Bearer good", "cookie": "not passed"}) as ws:
            assert await ws.recv() == "query media=raw&token=good"
            await ws.send(b"\x00\x01frame")
            assert await ws.recv() == b"echo \x00\x01frame"
            await ws.send("hello")
            assert await ws.recv() == "echo hello"
            await ws.send("close 4409")
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
        assert closed.value.rcvd is not None
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4409, "going elsewhere")
        assert worker.headers == [{"authorization": "Bearer good"}]

        async with connect(created["ws_url"]) as ws:
            assert await ws.recv() == "query "
        for _ in range(50):  # the client's close reaches the worker
            if worker.client_closed:
                break
            await asyncio.sleep(0.02)
        assert worker.client_closed == [1000]


async def test_unknown_sessions_and_unreachable_workers_are_refused_like_a_daemon() -> None:
    async with _fleet(Worker(), worker_url=f"http://127.0.0.1:{find_free_port()}") as (gw, _), \
            httpx.AsyncClient(timeout=10) as http:
        ws_base = "ws" + gw[4:]
        async with connect(f"{ws_base}/v1/sessions/s-nope/ws") as ws:
            error = decode(await ws.recv(), expect="server")
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
        assert isinstance(error, Error) and (error.code, error.fatal) == ("not_found", True)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4404

        await http.post(f"{gw}/v1/sessions", json={"mode": "world"})  # bound to a worker nobody answers at
        async with connect(f"{ws_base}/v1/sessions/{SID}/ws") as ws:
            error = decode(await ws.recv(), expect="server")
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
        assert isinstance(error, Error) and error.code == "store_unavailable"
        assert "the session's worker did not answer" in error.message
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4503
        offer = await http.post(f"{gw}/v1/sessions/{SID}/webrtc", json={"sdp": "o", "type": "offer"})
        assert (offer.status_code, offer.json()["error"]["code"]) == (503, "store_unavailable")
        assert "the session's worker did not answer the offer" in offer.json()["error"]["message"]
        assert offer.headers["Retry-After"] == "2"


async def test_a_webrtc_offer_and_its_refusal_pass_through() -> None:
    async with _fleet(Worker()) as (gw, _), httpx.AsyncClient(timeout=10) as http:
        await http.post(f"{gw}/v1/sessions", json={"mode": "world"})
        url = f"{gw}/v1/sessions/{SID}/webrtc"
        answer = await http.post(url, json={"sdp": "v=0", "type": "offer"}, headers={"authorization": "Bearer good"})
        assert (answer.status_code, answer.json()) == (200, {"sdp": "answer to v=0", "type": "answer"})
        refused = await http.post(url, json={"sdp": "v=0", "type": "offer"}, headers={"authorization": "Bearer bad"})
        assert (refused.status_code, refused.json()["error"]["code"]) == (401, "unauthorized")
        too_big = await http.post(url, content=b"x" * (64 * 1024 + 1), headers={"authorization": "Bearer good"})
        assert (too_big.status_code, too_big.json()["error"]["code"]) == (400, "too_large")
