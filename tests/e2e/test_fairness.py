"""Many sessions on one CPU engine: everyone progresses, deadlines come first."""

from __future__ import annotations

import asyncio

import pytest

from protocols.client import SessionClient
from protocols.messages import Frame
from tests.conftest import off_loop, running_daemon, tiny_engine
from tests.e2e._util import collect_for


async def _world_frames(url: str, seconds: float, start: asyncio.Event) -> int:
    client = SessionClient(timeout_s=30.0)
    try:
        await client.create(url, "world")
        await client.connect()
        await start.wait()
        return sum(isinstance(m, Frame) for m in await collect_for(client, seconds))
    finally:
        if client.session is not None:
            await client.close_session()
        await client.aclose()


@pytest.mark.slow
async def test_two_dozen_world_sessions_progress_fairly() -> None:
    # the scheduler's fairness, not admission: admit by KV budget, so the duty policy's calibration
    # on a loaded machine cannot refuse some of the two dozen
    async with off_loop(running_daemon(tiny_engine(), policy="kv")) as daemon:
        start = asyncio.Event()
        tasks = [asyncio.create_task(_world_frames(daemon.url, 4.0, start)) for _ in range(24)]
        await asyncio.sleep(1.0)  # every session created and connected
        start.set()
        counts = list(await asyncio.gather(*tasks))
    assert len(counts) == 24
    assert min(counts) >= 16  # each saw at least a second of media in 4 s
    assert min(counts) >= 0.5 * max(counts)  # nobody got less than half of the best served


@pytest.mark.slow
async def test_director_segments_do_not_starve_a_world_session(daemon) -> None:
    world = SessionClient(timeout_s=30.0)
    await world.create(daemon.url, "world")
    await world.connect()
    directors = []
    for _ in range(4):
        d = SessionClient(timeout_s=30.0)
        await d.create(daemon.url, "director")
        await d.connect()
        directors.append(d)
    try:
        await collect_for(world, 1.0)  # the world's initial lead
        for d in directors:
            await d.direct("an endless flight over mountains", seconds=60)
        readers = [asyncio.create_task(collect_for(d, 3.0)) for d in directors]
        world_msgs = await collect_for(world, 3.0)
        director_msgs = await asyncio.gather(*readers)
    finally:
        for c in [world, *directors]:
            await c.close_session()
            await c.aclose()
    world_frames = sum(isinstance(m, Frame) for m in world_msgs)
    director_min = min(sum(isinstance(m, Frame) for m in msgs) for msgs in director_msgs)
    assert world_frames >= 3 * 16 - 8  # real time, within a chunk
    assert director_min >= 16  # the directors progress too
