"""A fleet of real daemons for the end-to-end tests: `sessiond serve --fleet` workers (tiny model,
CPU) and `sessiond gateway`s as processes over a real redis-server and Dynamo file discovery, and
the client-side checks the tests share (streams with their pts, the shared store's records)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from fleet.directory import RedisDirectory
from fleet.messages import Binding
from protocols.client import SessionClient
from protocols.messages import Frame, Moved
from sessiond.store.redis_store import RedisStore
from tests.conftest import find_free_port

from .conftest import Processes

WORKER_TIMEOUT_S = 90.0


@dataclass
class Fleet:
    processes: Processes
    redis_url: str
    discovery_dir: str
    workers: dict[str, Any] = field(default_factory=dict)  # key -> Popen
    ports: dict[str, int] = field(default_factory=dict)  # key -> HTTP port
    gateways: list[tuple[Any, str]] = field(default_factory=list)  # (Popen, url)
    etcd: str | None = None  # etcd discovery at this URL (else file discovery in discovery_dir)

    def discovery(self) -> list[str]:
        if self.etcd is not None:
            return ["--discovery", "etcd", "--etcd", self.etcd]
        return ["--discovery-dir", self.discovery_dir]

    def start_worker(self, key: str, *extra: str) -> None:
        port = find_free_port()
        self.ports[key] = port
        self.workers[key] = self.processes.start(
            "-m", "sessiond.cli", "serve", "--fleet", "--model", "tiny", "--device", "cpu", "--port", str(port),
            "--redis-url", self.redis_url, *self.discovery(), "--rpc-host", "127.0.0.1",
            "--worker-key", key, "--log-level", "info", "--checkpoint-s", "0.5",
            # KV admission: every worker has the same headroom, so the spread the tests assert does
            # not depend on how each worker's duty calibration went on a shared 2-core machine
            "--policy", "kv", *extra)

    def start_gateway(self, *extra: str) -> str:
        port = find_free_port()
        proc = self.processes.start("-m", "sessiond.cli", "gateway", "--port", str(port), "--redis", self.redis_url,
                                    *self.discovery(), "--rpc-host", "127.0.0.1", *extra)
        url = f"http://127.0.0.1:{port}"
        self.gateways.append((proc, url))
        return url

    async def exit_status(self, key: str, within_s: float) -> int:
        """Worker `key`'s exit status once it exits; a failure naming the tail of its log if it is
        still running after `within_s`."""
        proc = self.workers[key]
        try:
            return int(await asyncio.to_thread(proc.wait, within_s))
        except subprocess.TimeoutExpired:
            log = self.processes.log(self.processes.procs.index(proc))
            raise AssertionError(f"worker {key} still running {within_s} s later; its log ends:\n{log[-3000:]}") \
                from None

    def key_of(self, ws_url: str) -> str:
        port = int(ws_url.split("/")[2].split(":")[1])
        return next(k for k, p in self.ports.items() if p == port)

    def split(self, streams: list[Stream], keys: list[str]) -> tuple[str, str, list[Stream]]:
        """Two workers' streams: the worker of the first stream (to drain), the other, and the
        streams on the first."""
        draining = self.key_of(streams[0].client.session.ws_url)  # type: ignore[union-attr]
        other = next(k for k in keys if k != draining)
        return draining, other, [s for s in streams if self.key_of(s.client.session.ws_url) == draining]  # type: ignore[union-attr]


async def until(predicate: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if await predicate():
                return
        except (httpx.HTTPError, OSError):
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


async def live_workers(url: str) -> list[str]:
    async with httpx.AsyncClient(timeout=5) as http:
        body = (await http.get(f"{url}/v1/capacity")).json()
    return sorted(w["worker"] for w in body["workers"] if not w["draining"])


async def bindings(redis_url: str, sids: list[str]) -> dict[str, Binding | None]:
    directory = RedisDirectory(redis_url)
    try:
        return {sid: await directory.lookup(sid) for sid in sids}
    finally:
        await directory.close()


def bound_worker(redis_url: str, sid: str) -> str:
    """The worker a session is bound to now, read through the fleet's directory from sync code (in a
    thread of its own: Playwright's sync API keeps an event loop running in the caller's)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        binding = pool.submit(asyncio.run, bindings(redis_url, [sid])).result()[sid]
    assert binding is not None, f"session {sid} is not bound"
    return binding.worker


async def stored_snapshot(redis_url: str, sid: str) -> bool:
    store = RedisStore(redis_url)
    try:
        return await store.get_snapshot(sid) is not None
    finally:
        await store.close()


async def stored_frames(redis_url: str, sid: str) -> int:
    store = RedisStore(redis_url)
    try:
        record = await store.get_session(sid)
    finally:
        await store.close()
    assert record is not None, f"session {sid} has no durable record"
    return record.frames_sent


@dataclass
class Stream:
    """One viewer of one session: every frame's (idx, pts, disc) and the moves it followed."""

    client: SessionClient
    frames: list[tuple[int, int, bool]] = field(default_factory=list)
    moves: list[Moved] = field(default_factory=list)
    ack: bool = True  # False: stop sending `received` (the window then holds the stream)

    @property
    def sid(self) -> str:
        assert self.client.session is not None
        return self.client.session.session_id

    async def read(self, until_frames: int) -> None:
        """Read until `until_frames` frames arrived in all (returns early when the connection ends)."""
        async for msg in self.client.messages():
            if isinstance(msg, Moved):
                self.moves.append(msg)
            if isinstance(msg, Frame):
                self.frames.append((msg.idx, msg.pts, msg.disc))
                if self.ack:
                    await self.client.received(msg.idx)
                if len(self.frames) >= until_frames:
                    return

    async def hold(self, quiet_s: float = 1.0) -> None:
        """Stop acknowledging frames and read until the `received` window holds the stream (no
        frame for `quiet_s`)."""
        self.ack = False
        while True:
            count = len(self.frames)
            try:
                await asyncio.wait_for(self.read(count + 1), quiet_s)
            except TimeoutError:
                return

    def check_timeline(self) -> None:
        """idx counts up by one frame at a time and pts never go back (moves included)."""
        for (i0, p0, _), (i1, p1, _) in zip(self.frames, self.frames[1:], strict=False):
            assert i1 == i0 + 1 and p1 > p0, (self.sid, (i0, p0), (i1, p1))
