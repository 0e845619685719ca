"""One inbound reader for both transports: every bad input of the protocol's table, sent over a
WebSocket and over a WebRTC data channel (real peers, a real daemon), gets the same error code
and moves the same protocol-error counter; the limits, the request rate and ping are the same."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import msgpack
import pytest
from aiortc import RTCDataChannel

from protocols.codec import encode
from protocols.messages import Error, Hello, Ping, Pong
from tests.conftest import RunningDaemon, off_loop, running_daemon
from tests.e2e._bad_inputs import MALFORMED
from tests.e2e._raw import RawConn
from tests.transports._client import LoopbackClient

_PROMPT_CHARS = 1500  # this daemon's --max-prompt-chars: under the default, so both readers must apply it
_INPUTS = [*(tuple(param.values) for param in MALFORMED),
           (msgpack.packb({"t": "direct", "id": 6, "prompt": "x" * (_PROMPT_CHARS + 1)}), "invalid_field")]
_CODES = ("bad_message", "unknown_type", "invalid_field", "too_large", "conflict", "rate_limited")


@dataclass
class _Wire:
    """A connected client on one transport: send bytes/str as they are, read the next reply of a kind."""

    send: Callable[[bytes | str], Awaitable[None]]
    next_of: Callable[[type], Awaitable[Any]]
    close: Callable[[], Awaitable[None]]


async def _websocket(session: dict[str, Any]) -> _Wire:
    conn = await RawConn.open(session["ws_url"], session["token"])
    return _Wire(conn.send_raw, conn.next_of, conn.close)


async def _webrtc(session: dict[str, Any], http: httpx.AsyncClient) -> _Wire:
    client = LoopbackClient()
    answer = await http.post(session["webrtc_url"], json={"sdp": await client.offer(), "type": "offer"},
                             headers={"Authorization": f"Bearer {session['token']}"})
    assert answer.status_code == 200
    await client.accept(answer.json()["sdp"], "answer")
    channel: RTCDataChannel = client.control
    await asyncio.wait_for(client.control_open.wait(), 20)

    async def send(data: bytes | str) -> None:
        channel.send(data)

    async def next_of(kind: type) -> Any:
        return await client.next_message(kind, 10)

    await send(encode(Hello(v=1)))  # optional on WebRTC: taken by the reader, as a WebSocket's first hello
    return _Wire(send, next_of, client.close)


def _counts(d: RunningDaemon) -> dict[str, float]:
    errors = d.daemon.metrics.protocol_errors
    return {code: errors.labels(code=code)._value.get() for code in _CODES}


async def _send_table(d: RunningDaemon, wire: _Wire) -> tuple[list[tuple[str, bool]], dict[str, float]]:
    """Each bad input in turn: the error it got (code, fatal), and what the counters moved by."""
    before = _counts(d)
    got = []
    for data, _ in _INPUTS:
        await wire.send(data if isinstance(data, bytes | str) else encode(data))
        error: Error = await wire.next_of(Error)
        got.append((error.code, error.fatal))
    await wire.send(encode(Ping(id=77, ts=5.5)))
    pong: Pong = await wire.next_of(Pong)
    assert (pong.re, pong.ts) == (77, 5.5)  # the session goes on, and answers ping the same way
    after = _counts(d)
    return got, {code: after[code] - before[code] for code in _CODES}


@pytest.fixture
async def webrtc_daemon() -> AsyncIterator[RunningDaemon]:
    async with off_loop(running_daemon(webrtc_hosts=("127.0.0.1",), max_prompt_chars=_PROMPT_CHARS)) as d:
        yield d


async def _over_both(d: RunningDaemon, work: Callable[[_Wire], Awaitable[Any]]) -> dict[str, Any]:
    """`work` on a fresh world session over each transport: what it returned, by transport."""
    out = {}
    async with httpx.AsyncClient(timeout=30) as http:
        for name in ("websocket", "webrtc"):
            session = (await http.post(f"{d.url}/v1/sessions", json={"mode": "world"})).json()
            wire = await (_websocket(session) if name == "websocket" else _webrtc(session, http))
            try:
                out[name] = await work(wire)
            finally:
                await wire.close()
                await http.delete(f"{d.url}/v1/sessions/{session['session_id']}",
                                  headers={"Authorization": f"Bearer {session['token']}"})
    return out


async def test_every_bad_input_gets_the_same_code_and_count_over_websocket_and_webrtc(
        webrtc_daemon: RunningDaemon) -> None:
    expected = [(code, False) for _, code in _INPUTS]
    moved = {code: float(sum(1 for _, want in _INPUTS if want == code)) for code in _CODES}
    results = await _over_both(webrtc_daemon, lambda wire: _send_table(webrtc_daemon, wire))
    assert results == {"websocket": (expected, moved), "webrtc": (expected, moved)}


async def test_the_request_rate_is_the_same_over_both_transports(webrtc_daemon: RunningDaemon) -> None:
    async def flood(wire: _Wire) -> tuple[str, bool, int | None]:
        for i in range(55):  # 50 requests per second are allowed; pings are requests on both
            await wire.send(encode(Ping(id=i, ts=0.0)))
        error: Error = await wire.next_of(Error)
        return error.code, error.fatal, error.re

    limited = await _over_both(webrtc_daemon, flood)
    assert limited == {"websocket": ("rate_limited", False, 50), "webrtc": ("rate_limited", False, 50)}
