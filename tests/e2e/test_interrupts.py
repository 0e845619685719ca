"""Interrupt and flush: the ack carries the last pts that was or will be sent, nothing of the
old generation follows it, the next frame is `disc`, and the timeline never skips."""

from __future__ import annotations

import asyncio
import random

import pytest

from protocols.client import SessionClient
from protocols.messages import Ack, Frame, SegmentEnd
from protocols.timeline import pts_for
from tests.e2e._util import assert_timeline, collect, collect_for, collect_frames, session_client


def check_no_stale(messages: list[object], fps: int) -> tuple[int, int]:
    """Assert the no-stale rule over one connection's messages in wire order; returns
    (frames, acks checked)."""
    frames = [m for m in messages if isinstance(m, Frame)]
    assert_timeline(frames, fps, frames[0].idx if frames else 0)
    acks = 0
    for pos, msg in enumerate(messages):
        if not (isinstance(msg, Ack) and msg.pts is not None):
            continue
        acks += 1
        before = [m for m in messages[:pos] if isinstance(m, Frame)]
        after = [m for m in messages[pos + 1:] if isinstance(m, Frame)]
        assert all(f.pts <= msg.pts for f in before)
        assert all(f.pts > msg.pts for f in after)  # nothing of the old generation after the ack
        if before:
            assert before[-1].pts == msg.pts  # the ack names the last frame that went out
        if after:
            assert after[0].disc and after[0].pts == pts_for(before[-1].idx + 1 if before else 0, fps)
    return len(frames), acks


async def test_interrupt_ack_names_the_last_sent_frame_and_the_next_one_is_disc(daemon) -> None:
    async with session_client(daemon.url, "world") as client:
        await collect_frames(client, 12)
        task = asyncio.create_task(collect(client, lambda m: sum(isinstance(x, Frame) and x.disc for x in m)
                                           >= 1))
        ack = await client.interrupt()
        msgs = await task
        assert isinstance(ack, Ack) and ack.pts is not None
        after_ack = msgs[msgs.index(ack) + 1:]
        first = next(m for m in after_ack if isinstance(m, Frame))
        assert first.disc and first.pts == ack.pts + 5625


async def test_flush_drops_unsent_frames_and_generation_goes_on(daemon) -> None:
    async with session_client(daemon.url, "director") as client:
        await client.direct("a long shot", seconds=4)  # 64 frames
        first = await collect_frames(client, 1)
        await client.received(first[0].idx)  # from now on at most a window (16) is in flight
        await asyncio.sleep(0.6)  # the engine fills the window and the session's queue behind it
        held = [m for m in await collect_for(client, 0.3) if isinstance(m, Frame)]
        ack = await client.flush()
        assert isinstance(ack, Ack) and ack.pts == held[-1].pts  # the window held the rest back
        await client.received(held[-1].idx)
        msgs: list[object] = []

        async def ack_each_frame_until_the_end() -> None:
            async for msg in client.messages():
                msgs.append(msg)
                if isinstance(msg, Frame):
                    await client.received(msg.idx)
                if isinstance(msg, SegmentEnd):
                    return

        await asyncio.wait_for(ack_each_frame_until_the_end(), 20)
        end = msgs[-1]
        assert isinstance(end, SegmentEnd) and end.status == "done"  # the segment went on
        after = [m for m in msgs if isinstance(m, Frame)]
        assert after[0].disc and after[0].idx == held[-1].idx + 1
        assert_timeline(first + held + after, 16)
        frames = len(first) + len(held) + len(after)
        assert end.frames == frames < 64  # what was queued at the flush never went out


async def _hammer(url: str, mode: str, seconds: float, rng: random.Random) -> tuple[int, int]:
    client = SessionClient(timeout_s=30.0)
    await client.create(url, mode)
    await client.connect()
    messages: list[object] = []

    async def read() -> None:
        async for msg in client.messages():
            messages.append(msg)

    reader = asyncio.create_task(read())
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    try:
        if mode == "director":
            await client.direct("a city at night", seconds=3)
        while loop.time() < end:
            await asyncio.sleep(rng.uniform(0.02, 0.25))
            roll = rng.random()
            if roll < 0.3:
                await client.interrupt()
            elif roll < 0.55:
                await client.flush()
            elif mode == "director":
                await client.direct(rng.choice(["a city", "a beach", "a storm"]), seconds=rng.choice([1, 3]),
                                    cut=rng.random() < 0.2)
            else:
                await client.send_action(rng.sample(["w", "a", "s", "d"], 2), mouse=(rng.random(), 0.0))
        await asyncio.sleep(0.3)
    finally:
        await client.close_session()
        await client.disconnect()
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await client.aclose()
    return check_no_stale(messages, 16)


@pytest.mark.slow
async def test_no_stale_frame_after_any_ack_under_load(daemon) -> None:
    rng = random.Random(1234)
    modes = ["world"] * 6 + ["director"] * 6
    results = await asyncio.gather(*(_hammer(daemon.url, mode, 8.0, random.Random(rng.random())) for mode in modes))
    frames = sum(f for f, _ in results)
    acks = sum(a for _, a in results)
    assert frames >= 800  # the load is real: 12 sessions streamed 1,072-2,600 frames in 8 s on 2-core boxes
    assert acks >= 100
