"""`sessiond drain` on a real fleet (two tiny CPU workers, a gateway, a real redis-server, Dynamo
file discovery, all on loopback): the drained worker's sessions resume on the other worker at
the next frame their viewers had not received, exactly as after a SIGTERM drain: idx goes on by
one, pts by one frame period, the first frame after the move carries `disc`."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from protocols.client import SessionClient
from protocols.timeline import pts_for
from tests.conftest import RedisServer

from ._fleet import WORKER_TIMEOUT_S, Fleet, Stream, bindings, live_workers, until
from .conftest import ROOT, Processes

pytestmark = [pytest.mark.slow, pytest.mark.redis]

KEYS = ["h1/cpu-0", "h1/cpu-1"]
FPS = 16  # the tiny model's frame rate


def _frames_after_move(s: Stream) -> int:
    """Frames from the first one with `disc` after the first 6 (the move) to the last."""
    moved_at = next((i for i, f in enumerate(s.frames) if i >= 6 and f[2]), None)
    return 0 if moved_at is None else len(s.frames) - moved_at


async def _open(url: str) -> Stream:
    client = SessionClient(timeout_s=10)
    await client.create(url, "world")
    await client.connect()
    return Stream(client)


async def test_drain_command_resumes_each_session_at_its_next_frame(
        processes: Processes, redis_server: RedisServer, discovery_env: dict[str, str]) -> None:
    fleet = Fleet(processes, redis_server.url, discovery_env["DYN_FILE_KV"])
    for key in KEYS:
        fleet.start_worker(key, "--max-sessions", "4")
    gw = fleet.start_gateway()

    async def sees_all() -> bool:
        return await live_workers(gw) == KEYS
    await until(sees_all, WORKER_TIMEOUT_S, f"gateway {gw} seeing {KEYS}")

    streams = [await _open(gw) for _ in range(4)]
    try:
        await asyncio.gather(*(s.read(6) for s in streams))
        draining, other, leaving = fleet.split(streams, KEYS)
        assert len(leaving) == 2
        reading = [asyncio.create_task(s.read(10**9)) for s in streams]  # until cancelled below
        await asyncio.sleep(0.3)
        drain = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "sessiond.cli", "drain", "--redis-url", fleet.redis_url, "--discovery-dir",
             fleet.discovery_dir, "--rpc-host", "127.0.0.1", "--worker", draining, "--wait-s", "30"],
            cwd=ROOT, env=processes.env, capture_output=True, text=True, timeout=60)
        assert drain.returncode == 0, drain.stdout + drain.stderr
        assert f"draining {draining}: 2 sessions to move" in drain.stdout
        assert sorted(drain.stdout.splitlines()[1:3]) == sorted(f"{s.sid} -> {other}" for s in leaving)
        assert await fleet.exit_status(draining, 30) == 0

        async def followed() -> bool:  # each moved viewer has 8 frames from the new worker
            return all(len(s.moves) == 1 and _frames_after_move(s) >= 8 for s in leaving)
        await until(followed, 30, "8 frames from the new worker on every moved stream")
        for task in reading:
            task.cancel()
        await asyncio.gather(*reading, return_exceptions=True)

        for s in streams:
            s.check_timeline()
        for s in leaving:
            assert [m.ws_url for m in s.moves] == [s.client.session.ws_url]  # type: ignore[union-attr]
            assert fleet.key_of(s.client.session.ws_url) == other  # type: ignore[union-attr]
            moved_at = next(i for i, (_, _, disc) in enumerate(s.frames) if i >= 6 and disc)
            before, after = s.frames[moved_at - 1], s.frames[moved_at]
            # the next undelivered frame: no index skipped, pts one frame period on
            assert after == (before[0] + 1, pts_for(before[0] + 1, FPS), True), (s.sid, before, after)
            assert [f[0] for f in s.frames] == list(range(s.frames[0][0], s.frames[0][0] + len(s.frames)))
            assert sum(disc for _, _, disc in s.frames[6:]) == 1
        after_bind = await bindings(fleet.redis_url, [s.sid for s in streams])
        assert {sid: (b.worker if b else None) for sid, b in after_bind.items()} == dict.fromkeys(after_bind, other)
    finally:
        for s in streams:
            await s.client.aclose()
