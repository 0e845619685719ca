"""A session outlives its connection: a reconnect with the token resumes at the next pts."""

from __future__ import annotations

import asyncio
import contextlib

from protocols.client import ClientError, SessionClient
from protocols.messages import Frame, SegmentEnd
from protocols.timeline import pts_for
from tests.e2e._util import assert_timeline, collect, collect_frames, new_client, session_client


async def test_world_reconnect_resumes_at_the_next_pts_with_disc(daemon) -> None:
    async with session_client(daemon.url, "world") as client:
        before = await collect_frames(client, 20)
        await client.disconnect()
        await asyncio.sleep(0.3)
        status = await client.status()
        assert status.state == "idle"
        sent = status.frames_sent
        assert sent >= 20 and status.pts == pts_for(sent, 16)
        await client.connect()
        after = await collect_frames(client, 10)
        assert after[0].idx == sent and after[0].pts == pts_for(sent, 16) and after[0].disc
        assert_timeline(after, 16, sent)
        assert not any(f.disc for f in after[1:]) and before[0].idx == 0
        assert (await client.status()).state == "active"


async def test_director_client_vanishing_mid_segment_frees_the_engine_and_resumes_on_reconnect(daemon) -> None:
    async with session_client(daemon.url, "director") as client:
        await client.received(0)
        await client.direct("a canyon", seconds=5)
        await collect_frames(client, 3)
        await client.disconnect()
        await asyncio.sleep(0.3)
        session = daemon.daemon.sessions[client.session.session_id]
        assert session.segment is None and session.job is None  # nothing generated for nobody
        status = await client.status()
        assert status.state == "idle" and status.segment == 1
        await client.connect()
        await client.direct("the canyon at dusk", seconds=1)
        msgs = await collect(client, lambda m: any(isinstance(x, SegmentEnd) for x in m))
        frames = [m for m in msgs if isinstance(m, Frame)]
        assert frames[0].idx == status.frames_sent and frames[0].disc and frames[0].segment == 2
        assert_timeline(frames, 16, status.frames_sent)


async def test_a_second_connection_takes_over_and_the_first_is_closed(daemon) -> None:
    first = await new_client(daemon.url, "world")
    second = SessionClient(timeout_s=20.0)
    try:
        await collect_frames(first, 4)
        second.attach(daemon.url, first.session)
        await second.connect()
        frames = await collect_frames(second, 4)
        assert frames[0].disc

        async def first_ends() -> None:
            with contextlib.suppress(ClientError):
                async for _ in first.messages():
                    pass

        await asyncio.wait_for(first_ends(), 5)  # the server closed the replaced connection
    finally:
        await second.aclose()
        await first.close_session()
        await first.aclose()
