"""A spectator that reads nothing, through a real daemon (tiny engine, uvicorn on loopback) and a
real socket that completes the handshake and `hello`, then never reads (4 KiB receive buffer):
it is dropped by whichever rule fires first, the ping rule (`viewer_ping_s`) or the send stall
(`spectator_stall_s`), each test setting the other out of reach so the reason is exact; the
server lets its socket go; the drop is counted and logged with its reason; the owner and another
spectator play on unbroken. Also: after spectators have been sent frames, `/v1/capacity` reports
a measured (not prior) cost per spectator."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from protocols.client import SessionClient
from protocols.messages import Frame, Media
from tests.conftest import ROOT, RunningDaemon, off_loop, running_daemon, tiny_engine
from tests.e2e._silent import SilentSpectator
from tests.e2e.test_spectators import live_session, share, spectator, wait_for

pytestmark = pytest.mark.asyncio


async def on_daemon_loop(running: RunningDaemon, fn: Any) -> Any:
    """`fn()` run on the daemon's event loop (the server's state is that loop's)."""
    loop = running.daemon._scheduler_task.get_loop()

    async def call() -> Any:
        return fn()

    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call(), loop))


async def server_holds(running: RunningDaemon, client_port: int) -> bool:
    def holds() -> bool:
        return any(p.client is not None and p.client[1] == client_port for p in running.server.server_state.connections)

    return bool(await on_daemon_loop(running, holds))


async def cap_server_send_buffer(running: RunningDaemon, client_port: int, size: int) -> None:
    """The kernel lets a socket's send buffer grow to tcp_wmem's maximum (4 MiB on the test box):
    a minute of the tiny model's 32x32 stream before a send stops completing. Capping the server's
    end of this one socket makes the stall come in seconds; nothing else about it changes."""
    def cap() -> int:
        (protocol,) = [p for p in running.server.server_state.connections
                       if p.client is not None and p.client[1] == client_port]
        sock = protocol.transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
        return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))

    assert await on_daemon_loop(running, cap) <= 4 * size


def dropped(running: RunningDaemon, reason: str) -> float:
    return float(running.daemon.metrics.spectators_dropped.labels(reason=reason)._value.get())


async def silent_spectator_is_dropped(running: RunningDaemon, media: str, reason: str,
                                      caplog: pytest.LogCaptureFixture, server_sndbuf: int | None = None) -> None:
    caplog.set_level(logging.INFO, logger="sessiond.session.lifecycle")
    owner = SessionClient(timeout_s=20.0)
    created = await owner.create(running.url, "world")
    sid = created.session_id
    link = await share(running.url, sid, created.token)
    silent = await SilentSpectator.open(created.ws_url, link["token"], media)
    if server_sndbuf is not None:
        await cap_server_send_buffer(running, silent.local_port, server_sndbuf)
    other = await spectator(running.url, owner, link["token"], media)
    await owner.connect()
    owner_frames: list[int] = []
    other_frames: list[int] = []

    async def keep_reading(client: SessionClient, into: list[int]) -> None:
        async for msg in client.messages():
            if isinstance(msg, Frame):
                into.append(msg.idx)
            elif isinstance(msg, Media):
                into.extend(range(msg.idx, msg.idx + msg.n))

    readers = [asyncio.create_task(keep_reading(owner, owner_frames)),
               asyncio.create_task(keep_reading(other, other_frames))]
    try:
        audience = live_session(running, sid).audience
        assert len(audience) == 2
        await wait_for(lambda: len(audience) == 1, 60.0)  # the silent one is gone, the other stays

        def left_records() -> list[logging.LogRecord]:
            return [r for r in caplog.records if getattr(r, "event", None) == "spectator_left"]

        # the daemon runs on its own thread: its `leave` counts and logs just after the member goes
        await wait_for(lambda: len(left_records()) >= 1, 10.0)
        print(f"\n{media} spectator dropped ({reason}) {time.monotonic() - silent.stopped_reading:.2f} s after it "
              "stopped reading")
        assert dropped(running, reason) == 1
        assert sum(dropped(running, r) for r in ("stalled", "ping_timeout", "rtcp_silent")) == 1
        assert [(r.session_id, r.media, r.reason) for r in left_records()] == [(sid, media, reason)]  # type: ignore[attr-defined]
        end = asyncio.get_running_loop().time() + 20.0
        while await server_holds(running, silent.local_port):  # the server let its socket go
            assert asyncio.get_running_loop().time() < end, "the server still holds the silent socket"
            await asyncio.sleep(0.05)
        assert await silent.reaches_end()  # and the client sees its end
        n_owner, n_other = len(owner_frames), len(other_frames)
        await wait_for(lambda: len(owner_frames) >= n_owner + 16 and len(other_frames) >= n_other + 16)
        assert owner_frames == list(range(len(owner_frames)))  # never a gap, during or after
        # the other spectator: every frame from its first (raw: 0; fmp4: its first key fragment)
        assert other_frames == list(range(other_frames[0], other_frames[0] + len(other_frames)))
        assert audience.members[0].frames_skipped == 0
    finally:
        for task in readers:
            task.cancel()
        silent.close()
        await other.aclose()
        await owner.close_session()
        await owner.aclose()


@pytest.mark.slow
@pytest.mark.parametrize("media", ["raw", "fmp4"])
async def test_a_spectator_that_reads_nothing_is_dropped_by_the_ping_rule(
        media: str, caplog: pytest.LogCaptureFixture) -> None:
    """The default ping rule (a ping every 2 s, its pong due within 2 s: 4 s at most); the stall
    bound (30 s) is out of reach."""
    async with off_loop(running_daemon(tiny_engine("private"), viewer_ping_s=2.0, spectator_stall_s=30.0)) as running:
        await silent_spectator_is_dropped(running, media, "ping_timeout", caplog)


@pytest.mark.slow
async def test_a_spectator_that_reads_nothing_is_dropped_when_its_sends_stall(caplog: pytest.LogCaptureFixture) -> None:
    """A send that does not complete for 0.5 s drops it; the ping rule (30 s) is out of reach."""
    async with off_loop(running_daemon(tiny_engine("private"), viewer_ping_s=30.0, spectator_stall_s=0.5)) as running:
        await silent_spectator_is_dropped(running, "raw", "stalled", caplog, server_sndbuf=16384)


async def test_capacity_reports_a_measured_cost_per_spectator_once_they_were_sent_frames() -> None:
    async with off_loop(running_daemon(tiny_engine("private"))) as running, httpx.AsyncClient(timeout=10.0) as http:
        before = (await http.get(f"{running.url}/v1/capacity")).json()["spectators"]
        assert (before["each_source"], before["each_cores"], before["each_measured_cores"]) == ("prior", 0.005, None)
        owner = SessionClient(timeout_s=20.0)
        created = await owner.create(running.url, "world")
        link = await share(running.url, created.session_id, created.token)
        watchers = [await spectator(running.url, owner, link["token"], "raw") for _ in range(4)]
        await owner.connect()
        counts = [0] * (len(watchers) + 1)

        async def keep_reading(client: SessionClient, i: int) -> None:
            async for msg in client.messages():
                if isinstance(msg, Frame):
                    counts[i] += 1

        readers = [asyncio.create_task(keep_reading(c, i)) for i, c in enumerate([owner, *watchers])]
        try:
            spectators: dict[str, Any] = {}

            async def measured() -> bool:
                nonlocal spectators
                spectators = (await http.get(f"{running.url}/v1/capacity")).json()["spectators"]
                return spectators["each_source"] == "measured"

            end = asyncio.get_running_loop().time() + 60.0
            while not await measured():
                assert asyncio.get_running_loop().time() < end, spectators
                await asyncio.sleep(0.25)
            print(f"\n/v1/capacity spectators: {spectators}")
            assert spectators["each_measured_cores"] > 0
            assert spectators["each_cores"] == max(spectators["each_measured_cores"], spectators["each_floor_cores"])
            assert spectators["sends_measured"] >= 100 and spectators["spectators"] == 4
            assert min(counts[1:]) > 0
        finally:
            for task in readers:
                task.cancel()
            for client in watchers:
                await client.aclose()
            await owner.close_session()
            await owner.aclose()


@pytest.mark.slow
async def test_a_webrtc_spectator_that_vanishes_is_dropped_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    """A WebRTC spectator in a process of its own, SIGKILLed: its RTCP stops, its peer is closed
    after `viewer_silence_s` of unanswered media, and the drop is counted as `rtcp_silent`."""
    caplog.set_level(logging.INFO, logger="sessiond.session.lifecycle")
    async with off_loop(running_daemon(tiny_engine("private"), webrtc_hosts=("127.0.0.1",))) as running:
        owner = SessionClient(timeout_s=20.0)
        created = await owner.create(running.url, "world")
        sid = created.session_id
        link = await share(running.url, sid, created.token)
        await owner.connect()
        owner_frames: list[int] = []

        async def keep_reading() -> None:
            async for msg in owner.messages():
                if isinstance(msg, Frame):
                    owner_frames.append(msg.idx)

        reader = asyncio.create_task(keep_reading())
        body = {**created.to_json(), "token": link["token"]}
        viewer = subprocess.Popen([sys.executable, "-m", "tests.e2e._viewer", "webrtc", json.dumps(body), running.url],
                                  cwd=ROOT, stdout=subprocess.PIPE)
        try:
            assert viewer.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(viewer.stdout.readline), 60)
            assert line.strip() == b"streaming"
            audience = live_session(running, sid).audience
            assert len(audience) == 1
            viewer.send_signal(signal.SIGKILL)
            await wait_for(lambda: len(audience) == 0, 30.0)
            assert dropped(running, "rtcp_silent") == 1
            left = [r for r in caplog.records if getattr(r, "event", None) == "spectator_left"]
            assert [(r.media, r.reason) for r in left] == [("webrtc", "rtcp_silent")]  # type: ignore[attr-defined]
            n = len(owner_frames)
            await wait_for(lambda: len(owner_frames) >= n + 16)
            assert owner_frames == list(range(len(owner_frames)))
        finally:
            viewer.kill()
            viewer.wait(10)
            if viewer.stdout is not None:
                viewer.stdout.close()
            reader.cancel()
            await owner.close_session()
            await owner.aclose()
