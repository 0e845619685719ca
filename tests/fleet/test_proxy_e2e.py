"""The gateway's proxy mode end to end on loopback: three `sessiond serve --fleet` workers (tiny
model, CPU), one `sessiond gateway --proxy`, a real redis-server and Dynamo file discovery. Create
and status name the gateway's URLs; raw and fMP4 WebSocket media and a WebRTC offer go through the
gateway to the bound worker; a SIGKILLed worker's proxied viewer is closed with 4503, reconnects
through the gateway and lands on the new worker; a worker drained by `sessiond drain` sends `moved` naming the
gateway (on the WebSocket and on WebRTC's control channel), the viewers following it land on
another worker, pts going on, and the command prints where each session went."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from protocols.client import ClientError, SessionClient
from protocols.messages import FramesInfo, Init, Media, Moved
from protocols.timeline import pts_for
from tests.conftest import RedisServer
from tests.transports._client import LoopbackClient

from ._fleet import WORKER_TIMEOUT_S, Fleet, Stream, bindings, live_workers, stored_frames, until
from .conftest import Processes, append_only_redis

pytestmark = [pytest.mark.slow, pytest.mark.redis]

KEYS = ["p1/cpu-0", "p1/cpu-1", "p1/cpu-2"]


@pytest.fixture
def fleet(processes: Processes, discovery_env: dict[str, str]) -> Iterator[Fleet]:
    server: RedisServer
    with append_only_redis() as server:
        yield Fleet(processes, server.url, discovery_env["DYN_FILE_KV"])


async def _fmp4(client: SessionClient, until_media: int, got: list[tuple[int, int, int, bool]]) -> int:
    """Read fMP4 media through the connection: (idx, n, pts, disc) of each fragment; returns inits seen."""
    inits = 0
    async for msg in client.messages():
        if isinstance(msg, Init):
            inits += 1
        if isinstance(msg, Media):
            got.append((msg.idx, msg.n, msg.pts, msg.disc))
            if len(got) >= until_media:
                break
    return inits


async def test_media_through_the_gateway_follows_failover_and_drain(fleet: Fleet) -> None:
    for key in KEYS:
        fleet.start_worker(key, "--max-sessions", "4", "--webrtc-hosts", "127.0.0.1")
    gw = fleet.start_gateway("--proxy")
    await until(lambda: _sees(gw), WORKER_TIMEOUT_S, f"gateway {gw} seeing {KEYS}")
    host = gw.split("//")[1]

    raw = SessionClient(timeout_s=10)
    fmp4 = SessionClient(timeout_s=10, auto_received=True)
    rtc = LoopbackClient()
    async with httpx.AsyncClient(timeout=20) as http:
        try:
            # create and status name the gateway; raw and fMP4 media come through it
            created = await raw.create(gw, "world")
            assert created.ws_url == f"ws://{host}/v1/sessions/{created.session_id}/ws"
            assert created.webrtc_url == f"http://{host}/v1/sessions/{created.session_id}/webrtc"
            await raw.connect("raw")
            stream = Stream(raw)
            await stream.read(6)
            await fmp4.create(gw, "world")
            await fmp4.connect("fmp4")
            fragments: list[tuple[int, int, int, bool]] = []
            assert await _fmp4(fmp4, 2, fragments) == 1
            assert [(idx, pts) for idx, _, pts, _ in fragments] == [(0, 0), (fragments[0][1], pts_for(
                fragments[0][1], 16))]
            await fmp4.disconnect()
            await fmp4.close_session()
            status = (await http.get(f"{gw}/v1/sessions/{stream.sid}",
                                     headers={"authorization": f"Bearer {created.token}"})).json()
            assert (status["ws_url"], status["webrtc_url"]) == (created.ws_url, created.webrtc_url)
            unknown = SessionClient(timeout_s=5)
            unknown.session = dataclasses.replace(created, session_id="s-unknown", ws_url=created.ws_url.replace(
                created.session_id, "s-unknown"))
            with pytest.raises(ClientError) as missing:
                await unknown.connect("raw")
            assert missing.value.code == "not_found"
            await unknown.aclose()

            # SIGKILL the raw viewer's worker (its position stored): the gateway closes the viewer with
            # 4503; it asks the gateway, reconnects there and lands on the new worker, pts going on
            doomed = (await bindings(fleet.redis_url, [stream.sid]))[stream.sid].worker  # type: ignore[union-attr]
            await stream.hold()
            last = stream.frames[-1][0]

            async def held() -> bool:
                return await stored_frames(fleet.redis_url, stream.sid) == last + 1
            await until(held, 10, "the raw session's position in the store")
            fleet.workers[doomed].send_signal(signal.SIGKILL)
            with pytest.raises(ClientError) as closed:
                await stream.read(len(stream.frames) + 1)
            assert closed.value.status == 503  # close 4503 (the client cannot tell capacity from store by code)
            assert "the session's worker went away" in closed.value.message
            stream.ack = True
            await raw.reconnect(within_s=25)
            assert raw.session.ws_url == created.ws_url  # type: ignore[union-attr]
            await stream.read(len(stream.frames) + 3)
            assert stream.frames[len(stream.frames) - 3] == (last + 1, pts_for(last + 1, 16), True)
            stream.check_timeline()
            after = (await bindings(fleet.redis_url, [stream.sid]))[stream.sid]
            assert after is not None and after.worker != doomed and after.epoch == 2
            draining = after.worker

            # a WebRTC session on that same worker: its offer goes through the gateway
            made = await _created_on(http, gw, fleet.redis_url, draining)
            auth = {"authorization": f"Bearer {made['token']}"}
            wrong = await http.post(made["webrtc_url"], json={"sdp": "x", "type": "offer"},
                                    headers={"authorization": "Bearer nope"})
            assert (wrong.status_code, wrong.json()["error"]["code"]) == (401, "unauthorized")
            answer = await http.post(made["webrtc_url"], json={"sdp": await rtc.offer(), "type": "offer"},
                                     headers=auth)
            assert answer.status_code == 200 and answer.json()["type"] == "answer", answer.text
            await rtc.accept(answer.json()["sdp"], "answer")
            assert (await rtc.next_message(FramesInfo, 30)).idx == 0

            # `sessiond drain` that worker: `moved` names the gateway on both; the raw viewer follows it there
            reading = asyncio.create_task(_until_moved(stream))
            await asyncio.sleep(0.3)
            drain = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "sessiond.cli", "drain", "--redis-url", fleet.redis_url, "--worker", draining,
                *fleet.discovery(), "--rpc-host", "127.0.0.1", "--wait-s", "30", env=fleet.processes.env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
            moved = await rtc.next_message(Moved, 30)
            assert (moved.ws_url, moved.webrtc_url) == (made["ws_url"], made["webrtc_url"])
            await asyncio.wait_for(reading, 40)
            assert [m.ws_url for m in stream.moves] == [created.ws_url]
            stream.check_timeline()
            final = (await bindings(fleet.redis_url, [stream.sid]))[stream.sid]
            assert final is not None and final.worker not in (doomed, draining) and final.epoch == 3
            assert await asyncio.to_thread(fleet.workers[draining].wait, 30) == 0
            said = (await drain.communicate())[0].decode()
            assert drain.returncode == 0, said
            # the Dynamo runtime may log its own (coloured) lines to the same output, even in the middle of
            # one of ours (two writers, one pipe): read ours, up to where a coloured one starts
            ours = [cut for line in said.splitlines() if (cut := line.split("\x1b", 1)[0])]
            assert ours[0] == f"draining {draining}: 2 sessions to move"
            assert f"{stream.sid} -> {final.worker}" in ours and ours[-1] == f"{draining} has left the fleet"
            gone = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "sessiond.cli", "drain", "--redis-url", fleet.redis_url, "--worker", draining,
                *fleet.discovery(), env=fleet.processes.env, stderr=asyncio.subprocess.PIPE)
            assert await gone.wait() == 2
            assert f"no live worker '{draining}'" in (await gone.stderr.read()).decode()  # type: ignore[union-attr]
        finally:
            await rtc.close()
            await raw.aclose()
            await fmp4.aclose()


async def _until_moved(stream: Stream) -> None:
    """Read until the stream has followed a `moved`, then 8 frames more."""
    while not stream.moves:
        await stream.read(len(stream.frames) + 1)
    await stream.read(len(stream.frames) + 8)


async def _created_on(http: httpx.AsyncClient, gw: str, redis_url: str, worker: str) -> dict[str, Any]:
    """A world session the gateway placed on `worker` (others it placed elsewhere are deleted)."""
    for _ in range(4):
        made: dict[str, Any] = (await http.post(f"{gw}/v1/sessions", json={"mode": "world"})).json()
        bound = (await bindings(redis_url, [made["session_id"]]))[made["session_id"]]
        if bound is not None and bound.worker == worker:
            return made
        await http.delete(f"{gw}/v1/sessions/{made['session_id']}", headers={"authorization": f"Bearer {made['token']}"})
    raise AssertionError(f"four creates, none placed on {worker}")


async def _sees(gw: str) -> bool:
    return await live_workers(gw) == sorted(KEYS)
