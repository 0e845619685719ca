"""Idle sessions: after idle_offload_s their KV goes to host memory, a reconnect restores it,
and after idle_close_s they are closed."""

from __future__ import annotations

import asyncio

import pytest

from protocols.client import ClientError, SessionClient
from protocols.messages import SegmentEnd
from tests.conftest import off_loop, running_daemon
from tests.e2e._util import assert_timeline, collect_frames


@pytest.mark.slow
async def test_an_idle_session_is_offloaded_restored_on_demand_and_closed_later() -> None:
    async with off_loop(running_daemon(idle_offload_s=0.5, idle_close_s=2.5)) as d, \
            SessionClient(timeout_s=20.0) as client:
        await client.create(d.url, "world")
        await client.connect()
        await collect_frames(client, 8)
        await client.disconnect()
        await asyncio.sleep(1.2)
        status = await client.status()
        assert status.state == "offloaded"
        kv = d.daemon.scheduler.kv
        assert kv.per_session[client.session.session_id][1] > 0  # slabs on the host
        await client.connect()
        after = await collect_frames(client, 8)
        assert after[0].disc
        assert_timeline(after, 16, status.frames_sent)  # resumes where it stopped
        assert (await client.status()).state == "active"
        await client.disconnect()
        await asyncio.sleep(3.5)
        with pytest.raises(ClientError) as closed:  # the idle session was closed
            await client.status()
        assert closed.value.code == "not_found"


@pytest.mark.slow
async def test_an_interrupt_or_flush_to_an_offloaded_director_restores_it_and_it_directs_again() -> None:
    async with off_loop(running_daemon(idle_offload_s=0.5, idle_close_s=30.0)) as d, \
            SessionClient(timeout_s=20.0) as client:
        await client.create(d.url, "director")
        await client.connect()
        await client.direct("a city at night", seconds=1)
        async for msg in client.messages():
            if isinstance(msg, SegmentEnd):
                break
        await asyncio.sleep(1.2)
        assert (await client.status()).state == "offloaded"
        await client.interrupt()  # its rollback needs the KV back on the device: no engine fault
        await client.flush()
        await client.direct("a beach", seconds=1)
        async for msg in client.messages():
            if isinstance(msg, SegmentEnd):
                assert msg.status == "done"
                break
        assert d.daemon.metrics.engine_faults._value.get() == 0
        assert (await client.status()).state in ("active", "idle")
