"""Director sessions: one segment per `direct`, chained by continuation, `cut` starts fresh."""

from __future__ import annotations

import asyncio

from protocols.messages import Ack, Frame, SegmentEnd, SegmentStart
from protocols.timeline import pts_for
from tests.e2e._util import assert_timeline, collect, collect_for, new_client


def _ends(msgs: list[object]) -> list[SegmentEnd]:
    return [m for m in msgs if isinstance(m, SegmentEnd)]


def test_segments_chain_on_one_continuous_timeline(daemon) -> None:
    async def run() -> None:
        client = await new_client(daemon.url, "director", prompt="a harbour")
        try:
            first_id = await client.direct("boats leave the harbour", seconds=1)
            msgs = await collect(client, lambda m: len(_ends(m)) == 1)
            second_id = await client.direct("the boats reach open sea", seconds=2)
            msgs += await collect(client, lambda m: len(_ends(m)) == 1)
            starts = [m for m in msgs if isinstance(m, SegmentStart)]
            ends = _ends(msgs)
            frames = [m for m in msgs if isinstance(m, Frame)]
            assert [(s.segment, s.re) for s in starts] == [(1, first_id), (2, second_id)]
            assert [(e.segment, e.re, e.status) for e in ends] == [(1, first_id, "done"), (2, second_id, "done")]
            seg1 = [f for f in frames if f.segment == 1]
            seg2 = [f for f in frames if f.segment == 2]
            # 1 s at 16 fps rounds up to 2 chunks (5 + 8 frames); 2 s to 4 chunks (8 each)
            assert (len(seg1), len(seg2)) == (13, 32)
            assert (ends[0].frames, ends[1].frames) == (13, 32)
            assert starts[0].pts == 0 and starts[1].pts == pts_for(13, 16) == ends[0].pts
            assert ends[1].pts == pts_for(45, 16)
            assert_timeline(frames, 16)
            assert not any(f.disc for f in frames)  # a continuation is no discontinuity
            assert (await client.status()).state == "idle"
        finally:
            await client.close_session()
            await client.aclose()

    asyncio.run(run())


def test_interrupt_ends_the_segment_as_interrupted_and_nothing_more_comes(daemon) -> None:
    async def run() -> None:
        client = await new_client(daemon.url, "director")
        try:
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
        finally:
            await client.close_session()
            await client.aclose()

    asyncio.run(run())


def test_cut_starts_fresh_with_a_discontinuity(daemon) -> None:
    async def run() -> None:
        client = await new_client(daemon.url, "director")
        try:
            await client.direct("a desert", seconds=1)
            msgs = await collect(client, lambda m: len(_ends(m)) == 1)
            await client.direct("a glacier", seconds=1, cut=True, seed=99)
            msgs += await collect(client, lambda m: len(_ends(m)) == 1)
            frames = [m for m in msgs if isinstance(m, Frame)]
            assert_timeline(frames, 16)
            cut_first = next(f for f in frames if f.segment == 2)
            assert cut_first.disc and cut_first.idx == 13
            assert [f.idx for f in frames if f.disc] == [13]
            # a fresh start decodes a first chunk again (5 frames, not 8)
            assert len([f for f in frames if f.segment == 2]) == 13
        finally:
            await client.close_session()
            await client.aclose()

    asyncio.run(run())


def test_a_new_direct_during_a_segment_replaces_it(daemon) -> None:
    async def run() -> None:
        client = await new_client(daemon.url, "director")
        try:
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
        finally:
            await client.close_session()
            await client.aclose()

    asyncio.run(run())
