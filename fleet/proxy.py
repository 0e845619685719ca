"""The gateway's optional media proxy (single-origin deployments): a session's WebSocket is relayed
to its bound worker message by message, and its WebRTC offer is forwarded to the worker's
signalling endpoint (the media itself then flows between the browser and the worker's ICE
candidates). The relay does not read the media: it copies each message as it comes, in both
directions, so its cost is one receive and one send per message.

Closes: a close the worker sends (after `moved`, or a refusal) goes to the client with its code
and reason; a worker that vanishes without a close (it died) closes the client with 4503
`store_unavailable`: the client asks the gateway where the session is now and reconnects, as it
does after any refusal of a server that no longer holds the session."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass

import httpx
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from fleet.errors import WorkerUnreachable
from httpapi import refuse_socket
from protocols.errors import ErrorCode, ProtocolError

__all__ = ["FORWARDED_HEADERS", "Signalled", "forward_offer", "forward_request", "relay_socket"]

FORWARDED_HEADERS = ("authorization", "x-api-key", "content-type")
_SENDABLE_CLOSE = frozenset({1000, 1001})  # client close codes passed on to the worker as they are
_UNSENDABLE_CLOSE = frozenset({1005, 1006, 1015})  # codes a close frame may not carry


@dataclass(frozen=True)
class Signalled:
    """The worker's answer to a forwarded WebRTC offer, as the gateway returns it."""

    status: int
    body: bytes
    content_type: str


def _forwarded(headers: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name in FORWARDED_HEADERS if (value := headers.get(name)) is not None}


async def _to_worker(ws: WebSocket, upstream: ClientConnection) -> int:
    """Client -> worker until the client goes; returns the client's close code."""
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return int(message.get("code") or 1000)
        data = message.get("bytes")
        await upstream.send(data if data is not None else str(message.get("text") or ""))


async def _to_client(upstream: ClientConnection, ws: WebSocket) -> None:
    """Worker -> client until the worker closes (ConnectionClosed says how)."""
    while True:
        data = await upstream.recv()
        if isinstance(data, bytes):
            await ws.send_bytes(data)
        else:
            await ws.send_text(data)


async def relay_socket(ws: WebSocket, upstream_url: str, open_timeout_s: float = 5.0) -> None:
    """Accept the client's WebSocket and relay it to `upstream_url` until either side closes."""
    await ws.accept()
    try:
        upstream = await ws_connect(upstream_url, additional_headers=_forwarded(ws.headers), compression=None,
                                    max_size=None, ping_interval=None, proxy=None, open_timeout=open_timeout_s)
    except (OSError, TimeoutError, InvalidHandshake) as exc:
        await refuse_socket(ws, ProtocolError(
            ErrorCode.STORE_UNAVAILABLE, f"the session's worker did not answer ({exc}); ask GET /v1/sessions/"
            f"{ws.path_params.get('sid', '')} where the session is and reconnect"))
        return
    to_worker = asyncio.create_task(_to_worker(ws, upstream))
    to_client = asyncio.create_task(_to_client(upstream, ws))
    try:
        await asyncio.wait({to_worker, to_client}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (to_worker, to_client):
            task.cancel()
        await asyncio.gather(to_worker, to_client, return_exceptions=True)
    failures = [t.exception() for t in (to_worker, to_client) if t.done() and not t.cancelled()]
    closed = next((exc for exc in failures if isinstance(exc, ConnectionClosed)), None)
    if closed is None:  # the client went first
        code = to_worker.result() if to_worker.done() and not to_worker.cancelled() \
            and to_worker.exception() is None else 1000
        await upstream.close(code if code in _SENDABLE_CLOSE or 4000 <= code < 5000 else 1000)
        return
    with contextlib.suppress(RuntimeError, WebSocketDisconnect, OSError):
        if closed.rcvd is not None:
            code = closed.rcvd.code if closed.rcvd.code not in _UNSENDABLE_CLOSE else 1000
            await ws.close(code, closed.rcvd.reason)
        else:
            await refuse_socket(ws, ProtocolError(
                ErrorCode.STORE_UNAVAILABLE, "the session's worker went away; ask GET /v1/sessions/"
                f"{ws.path_params.get('sid', '')} where the session is now and reconnect"))


async def forward_request(http: httpx.AsyncClient, method: str, url: str, body: bytes,
                          headers: Mapping[str, str]) -> Signalled:
    """One HTTP request passed to the session's worker (share links); its answer as it was."""
    try:
        reply = await http.request(method, url, content=body, headers=_forwarded(headers))
    except httpx.HTTPError as exc:
        raise WorkerUnreachable(f"the session's worker did not answer ({exc!r}); retry shortly") from exc
    return Signalled(reply.status_code, reply.content, reply.headers.get("content-type", "application/json"))


async def forward_offer(http: httpx.AsyncClient, webrtc_url: str, body: bytes,
                        headers: Mapping[str, str]) -> Signalled:
    """POST a WebRTC offer to the worker's signalling endpoint; its answer (or refusal) as it was."""
    try:
        reply = await http.post(webrtc_url, content=body, headers=_forwarded(headers))
    except httpx.HTTPError as exc:  # the gateway answers 503 store_unavailable with Retry-After
        raise WorkerUnreachable(f"the session's worker did not answer the offer ({exc!r}); retry shortly") from exc
    return Signalled(reply.status_code, reply.content, reply.headers.get("content-type", "application/json"))
