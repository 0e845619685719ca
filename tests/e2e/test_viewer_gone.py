"""A world session stops generating soon after its viewer is gone: within 1 s of a goodbye
(WebSocket close, WebRTC peer close, `control` channel close) and within 5 s of a viewer that
vanished without one (its process SIGKILLed or SIGSTOPped), not after ICE's 30 s consent timeout."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from protocols.client import SessionClient
from protocols.http import CreateSessionResponse
from protocols.messages import Frame
from tests.conftest import ROOT, RunningDaemon, off_loop, running_daemon
from tests.e2e._util import collect
from tests.transports._client import LoopbackClient

LOOPBACK = ("127.0.0.1",)


async def _create(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
    response = await http.post(f"{url}/v1/sessions", json={"mode": "world"})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def _generating(d: RunningDaemon, sid: str) -> bool:
    session = d.daemon.sessions.get(sid)
    return session is not None and (session.connection is not None or session.job is not None)


async def _stop_latency(d: RunningDaemon, sid: str, since: float, limit_s: float) -> float:
    """Seconds from `since` until the session has no viewer and no chunk in the engine; then no
    chunk is generated for it for half a second."""
    while _generating(d, sid):
        assert time.monotonic() - since < limit_s + 1, f"still generating {limit_s + 1} s after its viewer went"
        await asyncio.sleep(0.01)
    latency = time.monotonic() - since
    session = d.daemon.sessions[sid]
    done = session.chunks_done
    await asyncio.sleep(0.5)
    assert session.chunks_done == done and session.job is None
    print(f"\nstopped {latency:.3f} s after the viewer went")
    return latency


async def _webrtc_client(http: httpx.AsyncClient, body: dict[str, Any]) -> LoopbackClient:
    client = LoopbackClient()
    answer = await http.post(body["webrtc_url"], json={"sdp": await client.offer(), "type": "offer"},
                             headers={"Authorization": f"Bearer {body['token']}"})
    assert answer.status_code == 200, answer.text
    await client.accept(answer.json()["sdp"], "answer")
    await asyncio.wait_for(client.frames.get(), 30)
    return client


async def test_a_websocket_close_stops_generation_within_one_second() -> None:
    async with off_loop(running_daemon()) as d, httpx.AsyncClient(timeout=30) as http:
        body = await _create(http, d.url)
        client = SessionClient(timeout_s=20.0)
        client.attach(d.url, CreateSessionResponse.from_json(body))
        await client.connect()
        await collect(client, lambda m: any(isinstance(x, Frame) for x in m), 30)
        since = time.monotonic()
        await client.disconnect()
        assert await _stop_latency(d, body["session_id"], since, 1.0) < 1.0
        await client.aclose()


@pytest.mark.parametrize("goodbye", ["peer_close", "control_close"])
async def test_a_webrtc_goodbye_stops_generation_within_one_second(goodbye: str) -> None:
    async with off_loop(running_daemon(webrtc_hosts=LOOPBACK)) as d, httpx.AsyncClient(timeout=30) as http:
        body = await _create(http, d.url)
        client = await _webrtc_client(http, body)
        await asyncio.wait_for(client.control_open.wait(), 10)
        since = time.monotonic()
        if goodbye == "peer_close":
            await client.close()
        else:
            client.control.close()
        try:
            assert await _stop_latency(d, body["session_id"], since, 1.0) < 1.0
        finally:
            await client.close()


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "how"), [("webrtc", signal.SIGKILL), ("ws", signal.SIGSTOP)])
async def test_a_viewer_vanishing_without_a_goodbye_stops_generation_within_five_seconds(
        kind: str, how: signal.Signals) -> None:
    async with off_loop(running_daemon(webrtc_hosts=LOOPBACK)) as d, httpx.AsyncClient(timeout=30) as http:
        body = await _create(http, d.url)
        viewer = subprocess.Popen([sys.executable, "-m", "tests.e2e._viewer", kind, json.dumps(body), d.url],
                                  cwd=ROOT, stdout=subprocess.PIPE)
        try:
            assert viewer.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(viewer.stdout.readline), 60)
            assert line.strip() == b"streaming"
            since = time.monotonic()
            viewer.send_signal(how)
            assert await _stop_latency(d, body["session_id"], since, 5.0) < 5.0
        finally:
            viewer.kill()
            viewer.wait(10)
            if viewer.stdout is not None:
                viewer.stdout.close()


@pytest.mark.slow
async def test_a_live_webrtc_viewer_is_never_taken_for_gone() -> None:
    """Its receiver reports keep answering our media: after twice the silence limit it still plays."""
    async with off_loop(running_daemon(webrtc_hosts=LOOPBACK)) as d, httpx.AsyncClient(timeout=30) as http:
        body = await _create(http, d.url)
        client = await _webrtc_client(http, body)
        try:
            peer = d.daemon.webrtc_gateway().peer(body["session_id"])
            await asyncio.sleep(2 * d.daemon.config.viewer_silence_s)
            assert peer.live and peer.liveness.last_heard is not None
            assert _generating(d, body["session_id"])
        finally:
            await client.close()
