"""A tiny Starlette stand-in for the daemon, speaking docs/protocol.md just enough to exercise the
client over real HTTP and a real WebSocket on loopback. Test-only: the daemon is sessiond's."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from protocols.codec import decode, encode
from protocols.errors import ErrorCode, ProtocolError
from protocols.http import (
    CreateSessionRequest,
    CreateSessionResponse,
    ErrorBody,
    SessionStatus,
    ws_close_code_for,
)
from protocols.messages import (
    Ack,
    Action,
    Direct,
    Error,
    Flush,
    Frame,
    Hello,
    Interrupt,
    Limits,
    Ping,
    Pong,
    Received,
    Resume,
    SegmentEnd,
    SegmentStart,
    Welcome,
)
from protocols.timeline import pts_for

__all__ = ["FakeState", "fake_app", "serving"]

TOKEN = "fake-token-0123456789abcdef0123456789abcdef"
PIXELS = bytes([255, 0, 0, 0, 0, 255])  # a 2x1 rgb24 frame


@dataclass
class FakeState:
    full: bool = False  # answer every create with 503
    created: list[CreateSessionRequest] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    hellos: list[Hello] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    received: list[int] = field(default_factory=list)
    frames_sent: int = 0


def _error(err: ProtocolError, *, retry_after_s: float | None = None) -> JSONResponse:
    body = ErrorBody.from_error(err, retry_after_s=retry_after_s)
    headers = {"Retry-After": "3"} if retry_after_s is not None else None
    return JSONResponse(body.to_json(), status_code=body.status(), headers=headers)


def _response(sid: str, req: CreateSessionRequest) -> CreateSessionResponse:
    return CreateSessionResponse(
        sid,
        TOKEN,
        req.mode,
        "fake",
        2,
        1,
        30,
        {"keys": ["w"], "mouse": True},
        f"/v1/sessions/{sid}/ws",
        f"/v1/sessions/{sid}/webrtc",
    )


def fake_app(state: FakeState) -> Starlette:
    def authorized(sid: str, authorization: str | None) -> ProtocolError | None:
        if authorization != f"Bearer {TOKEN}":
            return ProtocolError(ErrorCode.UNAUTHORIZED, "wrong or missing token")
        if sid != "s-1":
            return ProtocolError(ErrorCode.NOT_FOUND, f"no session {sid}")
        return None

    async def create(request: Request) -> Response:
        try:
            req = CreateSessionRequest.from_json(await request.json())
        except ProtocolError as err:
            return _error(err)
        if state.full:
            return _error(ProtocolError(ErrorCode.CAPACITY, "no room for another session"), retry_after_s=2.5)
        state.created.append(req)
        return JSONResponse(_response("s-1", req).to_json(), status_code=201)

    async def one(request: Request) -> Response:
        sid = request.path_params["sid"]
        if (err := authorized(sid, request.headers.get("authorization"))) is not None:
            return _error(err)
        if request.method == "DELETE":
            state.deleted.append(sid)
            return Response(status_code=204)
        return JSONResponse(
            SessionStatus(
                sid,
                "world",
                "active",
                state.frames_sent,
                pts_for(state.frames_sent, 30),
                0,
                1764420000.5,
                1764420001.5,
            ).to_json()
        )

    async def ws_endpoint(ws: WebSocket) -> None:
        await ws.accept()
        if (err := authorized(ws.path_params["sid"], ws.headers.get("authorization"))) is not None:
            await ws.send_bytes(encode(Error(err.code.value, err.message, fatal=True)))
            await ws.close(ws_close_code_for(err.code))
            return
        hello = decode(await ws.receive_bytes(), expect="client")
        assert isinstance(hello, Hello)
        state.hellos.append(hello)
        session = _response("s-1", CreateSessionRequest("world")).public_json()
        await ws.send_bytes(encode(Welcome(1, session, Limits(window_frames=30))))
        try:
            while True:
                await _answer(ws, await ws.receive_bytes(), state)
        except WebSocketDisconnect:
            return

    return Starlette(
        routes=[
            Route("/v1/sessions", create, methods=["POST"]),
            Route("/v1/sessions/{sid}", one, methods=["GET", "DELETE"]),
            WebSocketRoute("/v1/sessions/{sid}/ws", ws_endpoint),
        ]
    )


async def _send_frame(ws: WebSocket, state: FakeState, segment: int, action_seq: int) -> None:
    n = state.frames_sent
    state.frames_sent += 1
    await ws.send_bytes(
        encode(Frame(pts_for(n, 30), n, 2, 1, "rgb24", PIXELS, segment, action_seq, disc=n == 0))
    )


async def _answer(ws: WebSocket, data: bytes, state: FakeState) -> None:
    try:
        msg = decode(data, expect="client")
    except ProtocolError as err:
        await ws.send_bytes(encode(Error(err.code.value, err.message, fatal=False)))
        return
    if isinstance(msg, Action):
        state.actions.append(msg)
        await _send_frame(ws, state, 0, msg.seq)
    elif isinstance(msg, Direct) and msg.prompt == "garbage":
        await ws.send_bytes(b"\xc1")
    elif isinstance(msg, Direct) and msg.prompt == "then close":
        for _ in range(3):
            await _send_frame(ws, state, 1, -1)
        await ws.close(1000)
        raise WebSocketDisconnect(1000)
    elif isinstance(msg, Direct):
        await ws.send_bytes(encode(SegmentStart(1, pts_for(state.frames_sent, 30), re=msg.id)))
        for _ in range(3):
            await _send_frame(ws, state, 1, -1)
        await ws.send_bytes(encode(SegmentEnd(1, pts_for(state.frames_sent, 30), 3, "done", re=msg.id)))
    elif isinstance(msg, Interrupt | Resume):
        await ws.send_bytes(encode(Ack(msg.id, pts=pts_for(max(state.frames_sent - 1, 0), 30))))
    elif isinstance(msg, Flush):
        await ws.send_bytes(encode(Error("conflict", "nothing to flush", fatal=False, re=msg.id)))
    elif isinstance(msg, Ping):
        await ws.send_bytes(encode(Pong(msg.id, msg.ts)))
    elif isinstance(msg, Received):
        state.received.append(msg.idx)
    # pause: deliberately never answered


@asynccontextmanager
async def serving(state: FakeState) -> AsyncIterator[str]:
    """Serve the fake app under uvicorn on a free loopback port; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        fake_app(state),
        log_level="warning",
        lifespan="off",
        ws="websockets-sansio",
        ws_per_message_deflate=False,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()  # serving failed: raise why
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()
