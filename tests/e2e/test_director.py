"""Director sessions: one segment per `direct`, chained by continuation, `cut` starts fresh."""

from __future__ import annotations

import asyncio

from protocols.messages import Ack, Frame, SegmentEnd, SegmentStart
from protocols.timeline import pts_for
from tests.e2e._util import assert_timeline, collect, collect_for, session_client


def _ends(msgs: list[object]) -> list[SegmentEnd]:
    return [m for m in msgs if isinstance(m, SegmentEnd)]


async def test_a_chain_of_three_segments_delivers_exactly_seconds_times_fps_frames_each(daemon) -> None:
    async with session_client(daemon.url, "director", prompt="a harbour") as client:
        ids, msgs = [], []
        for prompt, seconds in (("boats leave the harbour", 1), ("the boats reach open sea", 2),
                                ("a storm gathers", 1.5)):
            ids.append(await client.direct(prompt, seconds=seconds))
            msgs += await collect(client, lambda m: len(_ends(m)) == 1)
        starts = [m for m in msgs if isinstance(m, SegmentStart)]
        ends = _ends(msgs)
        frames = [m for m in msgs if isinstance(m, Frame)]
        assert [(s.segment, s.re) for s in starts] == [(1, ids[0]), (2, ids[1]), (3, ids[2])]
        assert [(e.segment, e.re, e.status) for e in ends] == [(1, ids[0], "done"), (2, ids[1], "done"),
                                                               (3, ids[2], "done")]
        # seconds x 16 fps each: chunks of 5 (first of the stream) and 8 frames, the last one cut
        assert [len([f for f in frames if f.segment == n]) for n in (1, 2, 3)] == [16, 32, 24]
        assert [e.frames for e in ends] == [16, 32, 24]
        assert [s.pts for s in starts] == [0, pts_for(16, 16), pts_for(48, 16)]
        assert [e.pts for e in ends] == [pts_for(16, 16), pts_for(48, 16), pts_for(72, 16)]
        assert_timeline(frames, 16)
        assert not any(f.disc for f in frames)  # a continuation is no discontinuity
        assert (await client.status()).state == "idle"


async def test_interrupt_ends_the_segment_as_interrupted_and_nothing_more_comes(daemon) -> None:
    async with session_client(daemon.url, "director") as client:
        await client.received(0)  # a window: the segment cannot finish before the interrupt
        seg = await client.direct("a slow pan", seconds=5)
        msgs = await collect(client, lambda m: sum(isinstance(x, Frame) for x in m) >= 5)
        task = asyncio.create_task(collect(client, lambda m: len(_ends(m)) == 1))
        ack = await client.interrupt()
        msgs += await task
        end = _ends(msgs)[0]
        assert isinstance(ack, Ack) and end.status == "interrupted" and end.re == seg
        frames = [m for m in msgs if isinstance(m, Frame)]
        assert end.frames == len(frames) < 80 and frames[-1].pts == ack.pts
        later = [m for m in await collect_for(client, 0.5) if isinstance(m, Frame)]
        assert later == []  # nothing is generated until the next direct
        assert (await client.status()).state == "idle"


async def test_cut_starts_fresh_with_a_discontinuity(daemon) -> None:
    async with session_client(daemon.url, "director") as client:
        await client.direct("a desert", seconds=1)
        msgs = await collect(client, lambda m: len(_ends(m)) == 1)
        await client.direct("a glacier", seconds=1, cut=True, seed=99)
        msgs += await collect(client, lambda m: len(_ends(m)) == 1)
        frames = [m for m in msgs if isinstance(m, Frame)]
        assert_timeline(frames, 16)
        cut_first = next(f for f in frames if f.segment == 2)
        assert cut_first.disc and cut_first.idx == 16
        assert [f.idx for f in frames if f.disc] == [16]
        assert len([f for f in frames if f.segment == 2]) == 16  # 1 s at 16 fps, like the first


async def test_a_new_direct_during_a_segment_replaces_it(daemon) -> None:
    async with session_client(daemon.url, "director") as client:
        await client.received(0)
        first = await client.direct("a forest", seconds=5)
        msgs = await collect(client, lambda m: any(isinstance(x, Frame) for x in m))
        second = await client.direct("the forest burns", seconds=1)
        await client.received(10_000)

        async def until_second_ends() -> None:
            async for msg in client.messages():
                msgs.append(msg)
                if isinstance(msg, Frame):
                    await client.received(msg.idx)
                if isinstance(msg, SegmentEnd) and msg.segment == 2:
                    return

        await asyncio.wait_for(until_second_ends(), 20)
        ends = _ends(msgs)
        assert [(e.segment, e.re, e.status) for e in ends] == [(1, first, "interrupted"), (2, second, "done")]
        frames = [m for m in msgs if isinstance(m, Frame)]
        assert_timeline(frames, 16)
        assert next(f for f in frames if f.segment == 2).disc
