"""Output flow control: the `received` window, bounded queues, a stalled client stalls nobody."""

from __future__ import annotations

import asyncio

import pytest
from websockets.asyncio.client import connect

from protocols.codec import encode
from protocols.messages import Frame, Hello
from tests.e2e._util import collect_for, collect_frames, new_client, session_client


@pytest.mark.slow
async def test_the_received_window_bounds_frames_in_flight_and_the_engine_stops(daemon) -> None:
    async with session_client(daemon.url, "director") as client:
        await client.received(0)
        await client.direct("a very long take", seconds=60)
        got = [m for m in await collect_for(client, 1.5) if isinstance(m, Frame)]
        assert len(got) <= client.welcome.limits.window_frames == 16
        session = daemon.daemon.sessions[client.session.session_id]
        chunks = session.chunks_done
        await asyncio.sleep(0.5)
        assert session.chunks_done == chunks  # held: the engine does not run ahead of the viewer
        assert session.out.media_frames <= daemon.daemon.config.outbox_chunks * 8
        await client.received(got[-1].idx)
        more = [m for m in await collect_for(client, 0.5) if isinstance(m, Frame)]
        assert more and more[0].idx == got[-1].idx + 1  # acknowledged: the stream goes on


@pytest.mark.slow
async def test_a_client_that_never_reads_is_bounded_and_stalls_nobody(daemon) -> None:
    stalled = await new_client(daemon.url, "director")
    await stalled.disconnect()
    session = daemon.daemon.sessions[stalled.session.session_id]
    url = f"{stalled.session.ws_url}?media=raw"
    headers = {"Authorization": f"Bearer {stalled.session.token}"}
    async with connect(url, additional_headers=headers, compression=None, max_size=2**20,
                       max_queue=1, proxy=None, close_timeout=0.5) as ws:
        await ws.send(encode(Hello(v=1)))
        from protocols.messages import Direct

        await ws.send(encode(Direct(id=1, prompt="nobody watches", seconds=600)))
        healthy = await new_client(daemon.url, "world")
        try:
            peak = 0
            frames = 0
            loop = asyncio.get_running_loop()
            end = loop.time() + 3.0
            sent = []
            while loop.time() < end:
                frames += sum(isinstance(m, Frame) for m in await collect_for(healthy, 0.25))
                peak = max(peak, session.out.media_frames)
                sent.append(session.out.sent)
            assert frames >= 3 * 16 - 8  # the healthy session plays in real time
            assert peak <= daemon.daemon.config.outbox_chunks * 8  # the stalled one's queue is bounded
            # and its engine stays within director_lead_s (10 s) of the segment's playback
            assert sent[-1] <= (10 + 1 + 3.5) * 16
        finally:
            await healthy.close_session()
            await healthy.aclose()
    await stalled.close_session()
    await stalled.aclose()


async def test_frames_keep_flowing_for_a_client_that_acknowledges(daemon) -> None:
    async with session_client(daemon.url, "director") as client:
        await client.received(0)
        await client.direct("a steady shot", seconds=3)
        total = []
        while len(total) < 40:
            frames = await collect_frames(client, 1)
            total += frames
            await client.received(frames[-1].idx)
        assert [f.idx for f in total] == list(range(40))
