"""Real daemons as a fleet, end to end on loopback: three `sessiond serve --fleet` workers (tiny
model, CPU), two `sessiond gateway`s, a real redis-server, and Dynamo's file discovery or a real
etcd (every scenario runs on both). Sessions spread by headroom and stay pinned across reconnects;
a SIGKILLed worker's sessions stream again from the others (through the gateway, within FAILOVER_S,
none lost, pts never back); a drained worker moves every session and its viewers follow `moved`; a
killed gateway leaves the other serving; bindings survive a Redis restart (append-only)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from protocols.client import SessionClient
from protocols.timeline import pts_for
from tests.conftest import RedisServer

from ._fleet import (
    WORKER_TIMEOUT_S,
    Fleet,
    Stream,
    bindings,
    live_workers,
    stored_frames,
    stored_snapshot,
    until,
)
from .conftest import Processes, append_only_redis

pytestmark = [pytest.mark.slow, pytest.mark.redis]

FAILOVER_S = 15.0  # the target: every session of a dead worker streams again within this
KEYS = ["h1/cpu-0", "h1/cpu-1", "h1/cpu-2"]


@pytest.fixture
def durable_redis() -> Iterator[RedisServer]:
    with append_only_redis() as server:
        yield server


@pytest.fixture(params=["file", "etcd"])
def fleet(request: pytest.FixtureRequest, processes: Processes, durable_redis: RedisServer,
          discovery_env: dict[str, str]) -> Fleet:
    """The fleet's processes on Dynamo's file discovery (one host) or on a real etcd (many hosts)."""
    etcd = request.getfixturevalue("etcd_server").url if request.param == "etcd" else None
    return Fleet(processes, durable_redis.url, discovery_env["DYN_FILE_KV"], etcd=etcd)


async def _started(fleet: Fleet, keys: list[str], gateways: int) -> list[str]:
    for key in keys:
        fleet.start_worker(key, "--max-sessions", "4")
    urls = [fleet.start_gateway() for _ in range(gateways)]
    for url in urls:
        async def sees_all(url: str = url) -> bool:
            return await live_workers(url) == sorted(keys)
        await until(sees_all, WORKER_TIMEOUT_S, f"gateway {url} seeing {keys}")
    return urls


async def _open(url: str, mode: str = "world") -> Stream:
    client = SessionClient(timeout_s=10)
    await client.create(url, mode)
    await client.connect()
    return Stream(client)


async def test_spread_pinned_sigkill_failover_and_a_gateway_down(fleet: Fleet) -> None:
    gw_a, gw_b = await _started(fleet, KEYS, gateways=2)

    # six sessions through one gateway spread two by two (its view is debited per placement)
    streams = [await _open(gw_a) for _ in range(6)]
    try:
        placed = {s.sid: fleet.key_of(s.client.session.ws_url) for s in streams}  # type: ignore[union-attr]
        assert Counter(placed.values()) == dict.fromkeys(KEYS, 2)
        bound = await bindings(fleet.redis_url, list(placed))
        assert {sid: b.worker for sid, b in bound.items() if b} == placed
        await asyncio.gather(*(s.read(8) for s in streams))

        # pinned: a viewer that reconnects through the other gateway lands on the same worker
        pinned = streams[0]
        await pinned.client.disconnect()
        pinned.client.base_url = gw_b
        await pinned.client.reconnect(within_s=10)
        assert fleet.key_of(pinned.client.session.ws_url) == placed[pinned.sid]  # type: ignore[union-attr]
        await pinned.read(len(pinned.frames) + 4)
        assert pinned.frames[8][2] is True  # the first frame after the reconnect has disc

        # hold each doomed stream on its window, with its position stored, then SIGKILL the worker
        doomed_key = placed[streams[1].sid]
        doomed = [s for s in streams if placed[s.sid] == doomed_key]
        await asyncio.gather(*(s.hold() for s in doomed))
        for s in doomed:
            async def held(s: Stream = s) -> bool:
                return await stored_frames(fleet.redis_url, s.sid) == s.frames[-1][0] + 1
            await until(held, 10, f"{s.sid}'s position in the store")
            assert await stored_snapshot(fleet.redis_url, s.sid), "the worker checkpoints generating sessions"
        fleet.workers[doomed_key].send_signal(signal.SIGKILL)
        killed_at = time.monotonic()

        async def back(s: Stream) -> float:
            last_idx = s.frames[-1][0]
            await s.client.disconnect()
            s.ack = True
            await s.client.reconnect(within_s=FAILOVER_S + 5)
            await s.read(len(s.frames) + 1)
            first = s.frames[-1]
            assert first == (last_idx + 1, pts_for(last_idx + 1, 16), True), (s.sid, first)
            return time.monotonic() - killed_at

        took = await asyncio.gather(*(back(s) for s in doomed))
        assert max(took) < FAILOVER_S, took
        moved = await bindings(fleet.redis_url, [s.sid for s in doomed])
        for s in doomed:
            b = moved[s.sid]
            assert b is not None and b.worker != doomed_key and b.epoch == 2, (s.sid, b)
            assert fleet.key_of(s.client.session.ws_url) == b.worker  # type: ignore[union-attr]
            await s.read(len(s.frames) + 4)
            s.check_timeline()
        print(f"failover: streaming again {sorted(round(t, 2) for t in took)} s after SIGKILL")

        # a gateway dies: the other one finds every session and places new ones
        fleet.gateways[0][0].kill()
        fleet.gateways[0][0].wait(10)
        async with httpx.AsyncClient(timeout=10) as http:
            for s in streams:
                token = s.client.session.token  # type: ignore[union-attr]
                got = await http.get(f"{gw_b}/v1/sessions/{s.sid}", headers={"authorization": f"Bearer {token}"})
                assert got.status_code == 200, got.text
            created = await http.post(f"{gw_b}/v1/sessions", json={"mode": "director"})
            assert created.status_code == 201, created.text
            assert fleet.key_of(created.json()["ws_url"]) != doomed_key
    finally:
        for s in streams:
            await s.client.aclose()


async def test_drain_moves_every_session_viewers_follow_and_bindings_survive_redis(
        fleet: Fleet, durable_redis: RedisServer) -> None:
    keys = KEYS[:2]
    (gw,) = await _started(fleet, keys, gateways=1)
    streams = [await _open(gw) for _ in range(4)]
    try:
        await asyncio.gather(*(s.read(6) for s in streams))
        draining, other, leaving = fleet.split(streams, keys)
        assert len(leaving) == 2
        reading = [asyncio.create_task(s.read(len(s.frames) + 24)) for s in streams]
        await asyncio.sleep(0.3)
        fleet.workers[draining].send_signal(signal.SIGTERM)
        await asyncio.wait_for(asyncio.gather(*reading), 30)
        assert await fleet.exit_status(draining, 30) == 0
        for s in streams:
            s.check_timeline()
        for s in leaving:  # told where to go, followed without help, pts going on with disc
            assert [m.ws_url for m in s.moves] == [s.client.session.ws_url]  # type: ignore[union-attr]
            assert fleet.key_of(s.client.session.ws_url) == other  # type: ignore[union-attr]
            assert sum(disc for _, _, disc in s.frames[6:]) == 1
        after = await bindings(fleet.redis_url, [s.sid for s in streams])
        assert {sid: (b.worker if b else None) for sid, b in after.items()} == dict.fromkeys(after, other)
        assert await live_workers(gw) == [other]

        # Redis restarts (append-only): the bindings and records are still there
        durable_redis.kill()
        durable_redis.start()
        async with httpx.AsyncClient(timeout=10) as http:
            for s in streams:
                token = s.client.session.token  # type: ignore[union-attr]

                async def found(s: Stream = s, token: str = token) -> bool:
                    got = await http.get(f"{gw}/v1/sessions/{s.sid}", headers={"authorization": f"Bearer {token}"})
                    return got.status_code == 200 and got.json()["ws_url"] == s.client.session.ws_url  # type: ignore[union-attr]
                await until(found, 15, f"{s.sid} found through the gateway after the Redis restart")
        assert await bindings(fleet.redis_url, [s.sid for s in streams]) == after
    finally:
        for s in streams:
            await s.client.aclose()


def test_serve_fleet_without_redis_says_what_to_add(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "sessiond.cli", "serve", "--fleet", "--model", "tiny"],
                          capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 2
    assert "config option `redis_url`: fleet mode needs the shared Redis" in done.stdout
