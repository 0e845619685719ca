"""A drained session resumed through a viewer's connect (not a control call) starts at the next
undelivered frame. Two real daemons (tiny model, uvicorn on free ports) share one real
redis-server; daemon A hands its session off with the drain control op's own code
(`DaemonAdapter.drain`) at the moment the race needs: right after the position of a chunk was made
durable and before any frame of that chunk left. A then lets the viewer go with `moved` naming B,
and B, which never got a control call, resumes the session from the store when the viewer
connects: the first frame there has idx = the last idx from A + 1, pts = pts_for(idx), `disc`."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from fleet.urls import media_urls
from protocols.client import SessionClient
from protocols.messages import Frame, Moved
from protocols.timeline import pts_for
from sessiond.fleet_adapter.daemon import DaemonAdapter
from sessiond.store.redis_store import RedisStore
from tests.conftest import RedisServer, off_loop, running_daemon, tiny_engine

pytestmark = [pytest.mark.slow, pytest.mark.redis]


class DrainAfterReserve:
    """Daemon A's position ledger's `reserve`, followed (once armed, for one session) by the drain
    control op, started on A's own loop before the chunk whose position was just written is packed
    and sent. Records what was reserved and what had been sent at that moment."""

    def __init__(self, daemon: Any) -> None:
        self.daemon = daemon
        self.real: Callable[[str, int], Awaitable[None]] = daemon.positions.reserve
        self.armed_for: str | None = None  # set from the test's thread, read on A's loop
        self.reserved = -1
        self.sent_then = -1
        self.loop: asyncio.AbstractEventLoop | None = None
        self.drained: concurrent.futures.Future[list[str]] = concurrent.futures.Future()

    async def __call__(self, session_id: str, frames: int) -> None:
        await self.real(session_id, frames)
        if session_id != self.armed_for:
            return
        self.armed_for = None
        self.reserved = frames
        self.sent_then = self.daemon.sessions[session_id].out.sent
        self.loop = asyncio.get_running_loop()
        # scheduled before the write loop awaits the chunk's packing, so the freeze (the first,
        # synchronous step of the hand-off) runs before any frame of this chunk is marked sent
        task = asyncio.ensure_future(DaemonAdapter(self.daemon).drain())
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Future[list[str]]) -> None:
        if task.exception() is not None:
            self.drained.set_exception(task.exception())  # type: ignore[arg-type]
        else:
            self.drained.set_result(task.result())


async def _stored(redis_url: str, sid: str) -> tuple[int, int | None]:
    store = RedisStore(redis_url)
    try:
        record = await store.get_session(sid)
        assert record is not None, f"session {sid} has no durable record"
        return record.frames_sent, await store.get_position(sid)
    finally:
        await store.close()


async def test_a_session_resumed_through_connect_after_drain_skips_no_frame(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    async with off_loop(running_daemon(redis_url=redis_server.url)) as a, \
            off_loop(running_daemon(tiny_engine("drain-b"), redis_url=redis_server.url)) as b:
        hook = DrainAfterReserve(a.daemon)
        monkeypatch.setattr(a.daemon.positions, "reserve", hook)  # each session's env takes it at creation
        fps, per_chunk = a.daemon.info.fps, a.daemon.info.frames_per_chunk
        client = SessionClient(timeout_s=20)
        try:
            await client.create(a.url, "world")
            await client.connect()
            sid = client.session.session_id  # type: ignore[union-attr]
            frames: list[tuple[int, int, bool, int]] = []  # idx, pts, disc, moves followed before it
            moves: list[Moved] = []

            async def read() -> None:
                async for msg in client.messages():
                    if isinstance(msg, Moved):
                        moves.append(msg)
                    if isinstance(msg, Frame):
                        frames.append((msg.idx, msg.pts, msg.disc, len(moves)))
                        await client.received(msg.idx)
                        if len(frames) == 10:
                            hook.armed_for = sid
                        if sum(f[3] for f in frames) >= 6:  # 6 frames from B
                            return

            reading = asyncio.create_task(read())
            assert await asyncio.wait_for(asyncio.wrap_future(hook.drained), 30) == [sid]
            # the race's state: a whole chunk's position durable, none of its frames sent
            assert hook.reserved == hook.sent_then + per_chunk, (hook.reserved, hook.sent_then)
            assert hook.loop is not None
            stored = await _stored(redis_server.url, sid)
            moved_to = media_urls(b.url, sid)
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
                DaemonAdapter(a.daemon).release(sid, moved_to), hook.loop))
            await asyncio.wait_for(reading, 30)
        finally:
            await client.aclose()

        assert [m.ws_url for m in moves] == [moved_to["ws_url"]]
        on_a = [f for f in frames if f[3] == 0]
        on_b = [f for f in frames if f[3] == 1]
        assert on_a[-1][0] == hook.sent_then - 1  # the viewer got every frame A counted as sent
        # the next undelivered frame: no index skipped, pts one frame period on, `disc` marks the move
        assert on_b[0][:3] == (hook.sent_then, pts_for(hook.sent_then, fps), True), (on_a[-1], on_b[0])
        assert [f[0] for f in frames] == list(range(frames[0][0], frames[0][0] + len(frames)))
        assert [f[1] for f in frames] == [pts_for(f[0], fps) for f in frames]
        assert [f[2] for f in frames[1:]].count(True) == 1
        # what B read at the connect: the record and the durable position both at the frames sent
        assert stored == (hook.sent_then, hook.sent_then)
