"""Crash-safe time: a daemon SIGKILLed at random moments while it streams a world session, then
restarted on the same Redis, never sends a pts that goes back or repeats; pts stay on the
session's grid, and the first frame after each restart says `disc`."""

from __future__ import annotations

import asyncio
import itertools
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from protocols.client import ClientError, SessionClient
from protocols.messages import Frame
from protocols.timeline import pts_for
from tests.conftest import ROOT, RedisServer, find_free_port, wait_ready

KILLS = 50


def _start(port: int, redis_url: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "sessiond.cli", "serve", "--model", "tiny", "--device", "cpu", "--port", str(port),
             "--redis-url", redis_url, "--policy", "kv"], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


async def _stream_until_killed(client: SessionClient, proc: subprocess.Popen[bytes], kill_after_s: float,
                               frames: list[Frame]) -> int:
    """Read frames until the daemon is SIGKILLed `kill_after_s` after the connect; the frames of
    this connection are appended to `frames`; returns how many came."""
    before = len(frames)

    async def read() -> None:
        try:
            async for msg in client.messages():
                if isinstance(msg, Frame):
                    frames.append(msg)
        except ClientError:
            pass  # the connection dies with the daemon

    reader = asyncio.create_task(read())
    await asyncio.sleep(kill_after_s)
    proc.kill()
    await asyncio.to_thread(proc.wait, 10)
    await asyncio.wait_for(reader, 10)
    await client.disconnect()
    return len(frames) - before


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.timeout(600)  # fifty daemon starts: 4-5 s each on the 2-core box, more when it is slow
async def test_pts_never_go_back_over_fifty_sigkills(redis_server: RedisServer, tmp_path: Path) -> None:
    rng = random.Random(16)
    port = find_free_port()
    log = tmp_path / "daemon.log"
    started = time.monotonic()
    frames: list[Frame] = []
    firsts: list[int] = []  # index into `frames` of each connection's first frame
    async with SessionClient(timeout_s=20.0, auto_received=True) as client:
        for kill in range(KILLS):
            proc = _start(port, redis_server.url, log)
            try:
                url = f"http://127.0.0.1:{port}"
                await asyncio.to_thread(wait_ready, url, 60)
                if kill == 0:
                    await client.create(url, "world", prompt="a quiet road", seed=3)
                await client.connect()
                firsts.append(len(frames))
                await _stream_until_killed(client, proc, rng.uniform(0.05, 0.8), frames)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
        fps = client.session.fps if client.session is not None else 0
    wall_s = time.monotonic() - started

    idx = [f.idx for f in frames]
    back_or_repeat = [(a, b) for a, b in itertools.pairwise(idx) if b <= a]
    assert back_or_repeat == []
    assert [f.pts for f in frames] == [pts_for(f.idx, fps) for f in frames]
    connected_with_frames = [i for i in firsts if i < len(frames)]
    resumed = [i for i in connected_with_frames if i > 0]
    assert all(frames[i].disc for i in resumed)  # a restart: the picture does not continue
    skipped = sum(b - a - 1 for a, b in itertools.pairwise(idx))
    print(f"\ncrash-safe time: {KILLS} kills, {len(frames)} pts checked, {len(resumed)} resumed "
          f"connections with frames, {skipped} frames skipped, wall {wall_s:.1f} s")
    assert len(resumed) >= KILLS // 2  # most kills happened while frames flowed
