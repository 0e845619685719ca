"""World sessions end to end: a real daemon (tiny engine) under uvicorn, the protocols client."""

from __future__ import annotations

import asyncio

import pytest

from protocols.messages import Ack, Frame, Stats
from tests.e2e._util import assert_timeline, collect, collect_frames, session_client


async def test_world_frames_start_at_pts_zero_and_follow_the_timeline(daemon) -> None:
    async with session_client(daemon.url, "world", prompt="a quiet forest", seed=7) as client:
        frames = await collect_frames(client, 40)
        assert_timeline(frames, client.session.fps)
        assert frames[0].pts == 0 and frames[1].pts == 5625  # 90000 / 16 fps
        assert all(f.w == 32 and f.h == 32 and f.fmt == "rgb24" and len(f.data) == 32 * 32 * 3 for f in frames)
        assert all(f.segment == 0 and not f.disc for f in frames)
        assert all(f.action_seq == -1 for f in frames)  # no action sent yet


async def test_actions_reach_the_frames_as_action_seq(daemon) -> None:
    async with session_client(daemon.url, "world") as client:
        await collect_frames(client, 8)
        for _ in range(3):
            await client.send_action(["w"], mouse=(1.0, -2.0))
        last = (await client.send_action(["w", "a"], buttons=1, axes=[0.5, -0.5])).seq
        msgs = await collect(client, lambda m: any(isinstance(x, Frame) and x.action_seq == last for x in m))
        seqs = [f.action_seq for f in msgs if isinstance(f, Frame)]
        assert seqs == sorted(seqs)  # never goes back
        assert seqs[-1] == 3


@pytest.mark.slow
async def test_world_generation_is_paced_to_a_small_lead(daemon) -> None:
    async with session_client(daemon.url, "world") as client:
        loop = asyncio.get_running_loop()
        start = loop.time()
        frames = await collect_frames(client, 64)
        elapsed = loop.time() - start
        # 64 frames at 16 fps are 4 s of media; a lead of 2 chunks (16 frames, 1 s) is what may
        # arrive early
        assert elapsed >= (64 - 8 - 16) / 16 - 0.25
        assert_timeline(frames, 16)


@pytest.mark.slow
async def test_pause_stops_the_stream_and_resume_continues_the_timeline(daemon) -> None:
    async with session_client(daemon.url, "world") as client:
        before = await collect_frames(client, 8)
        assert isinstance(await client.pause(), Ack)
        status = await client.status()
        assert status.state == "idle"
        await asyncio.sleep(1.2)  # what was generated before the pause drains
        sent_paused = (await client.status()).frames_sent
        await asyncio.sleep(0.8)
        assert (await client.status()).frames_sent == sent_paused  # nothing more while paused
        assert isinstance(await client.resume(), Ack)
        want = sent_paused + 8 - len(before)
        after = await collect(client, lambda m: sum(isinstance(x, Frame) for x in m) >= want)
        frames = before + [m for m in after if isinstance(m, Frame)]
        assert_timeline(frames, 16)
        assert (await client.status()).state == "active"


async def test_a_playing_session_gets_periodic_stats(daemon) -> None:
    async with session_client(daemon.url, "world") as client:
        msgs = await collect(client, lambda m: any(isinstance(x, Stats) for x in m), 5.0)
        stats = msgs[-1]
        assert stats.fps > 0 and stats.queue >= 0 and stats.gen_ms > 0 and stats.rtf > 0
