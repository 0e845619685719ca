"""The worker side of the fleet: one session daemon registered with the Dynamo runtime under a
stable key (host + device). It serves the control calls through the runtime, publishes its
capacity to the directory every second, and on SIGTERM drains: stops admitting, moves each of its
sessions to another worker (placement under the epoch fence), tells each viewer where it went
(`moved`: the new worker's URLs, or the gateway's for a session created through a proxying
gateway), withdraws its record and deregisters before it exits."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fleet.control import ControlHandler, to_admission
from fleet.daemon_port import FleetDaemon
from fleet.directory import RedisDirectory, SessionDirectory
from fleet.errors import FleetError, WorkerUnreachable
from fleet.messages import WorkerCapacity
from fleet.placement import Admitted, Placement, Refusal
from fleet.runtime import ControlClient, RuntimeConfig, open_runtime, serve_control
from fleet.tasks import raise_if_cancelled, stop
from fleet.urls import ORIGIN_FIELD, media_urls

__all__ = ["FleetWorker", "WorkerConfig", "serve_worker", "worker_key"]

logger = logging.getLogger(__name__)

UNREGISTER_TIMEOUT_S = 5.0  # a drained worker waits this long for the runtime to drop its endpoint


def worker_key(device: str, host: str | None = None) -> str:
    """The stable key of the worker driving `device` on this host, e.g. "node-3/cuda:1"."""
    return f"{host or socket.gethostname()}/{device}"


@dataclass(frozen=True)
class WorkerConfig:
    key: str  # stable across restarts: host + device
    base_url: str  # the daemon's public HTTP base (its media URLs)
    redis_url: str
    runtime: RuntimeConfig = field(default_factory=lambda: RuntimeConfig(file_dir="/tmp/sessiond-discovery"))
    rack: str = ""
    publish_every_s: float = 1.0
    capacity_ttl_s: float = 3.0
    directory_prefix: str = "fleet"

    def __post_init__(self) -> None:
        if "/" not in self.key:
            raise ValueError(f"a worker key is host/device (e.g. node-3/cuda:1), got {self.key!r}")
        if not 0 < self.publish_every_s < self.capacity_ttl_s:
            raise ValueError(f"publish_every_s ({self.publish_every_s}) must be > 0 and below capacity_ttl_s "
                             f"({self.capacity_ttl_s}), or a live worker's record would expire")


class FleetWorker:
    def __init__(self, daemon: FleetDaemon, config: WorkerConfig, directory: SessionDirectory | None = None) -> None:
        self.daemon = daemon
        self.config = config
        self.directory: SessionDirectory = directory or RedisDirectory(
            config.redis_url, prefix=config.directory_prefix, ttl_s=config.capacity_ttl_s)
        self.stop = asyncio.Event()  # set by SIGTERM/SIGINT or a `drain` control call
        self.handler = ControlHandler(daemon, config.base_url, on_drain=lambda _moving: self.stop.set())
        self.instance_id = 0
        self.moved: dict[str, str] = {}  # session id -> the worker it moved to on drain

    async def owns(self, session_id: str) -> bool:
        """Whether the directory binds the session to this worker (a session found only in the
        shared store may be resumed here on a client's connect only then)."""
        try:
            binding = await self.directory.lookup(session_id)
        except FleetError:
            return False
        return binding is not None and binding.worker == self.config.key

    def record(self) -> WorkerCapacity:
        cap = self.daemon.capacity()
        return WorkerCapacity(worker=self.config.key, instance_id=self.instance_id, base_url=self.config.base_url,
                              headroom=dict(cap.headroom), cost=dict(cap.cost),
                              kv_free_sessions=cap.kv_free_sessions, sessions=cap.sessions, draining=cap.draining,
                              rack=self.config.rack, published_at=time.time())

    async def publish_forever(self) -> None:
        while True:
            try:
                await self.directory.publish(self.record())
            except FleetError as exc:  # the directory is down: keep serving, publish again next second
                raise_if_cancelled()  # unless the Redis client turned a cancellation into this error
                logger.warning("capacity not published: %s", exc)
            raise_if_cancelled()
            await asyncio.sleep(self.config.publish_every_s)

    async def move_sessions(self, session_ids: list[str], control: ControlClient) -> None:
        """Re-place each session on another worker (it resumes there from the shared store), then
        let it go here. A session no other worker admits stays bound here and is reported."""
        placement = Placement(self.directory, view_ttl_s=0.0)

        def resume_of(sid: str) -> Callable[[WorkerCapacity], Awaitable[Admitted | Refusal]]:
            async def resume(w: WorkerCapacity) -> Admitted | Refusal:
                return to_admission(w.worker, await _call(control, w, {"op": "resume", "session_id": sid}))
            return resume

        async def abandon(w: WorkerCapacity, sid: str) -> None:
            await _call(control, w, {"op": "release", "session_id": sid})

        for sid in session_ids:
            binding = await self.directory.lookup(sid)
            if binding is None or binding.worker != self.config.key:
                continue
            try:
                placed = await placement.replace_session(binding, resume_of(sid), abandon)
            except FleetError as exc:
                logger.error("session %s could not move on drain: %s", sid, exc)
                continue
            self.moved[sid] = placed.binding.worker
            origin = binding.extra.get(ORIGIN_FIELD)  # a proxied session's viewer reconnects through its gateway
            await self.daemon.release(sid, {**placed.response, **media_urls(origin, sid)} if origin
                                      else placed.response)

    async def run(self) -> None:
        """Serve until `self.stop` is set (a signal or a `drain` call), then drain: stop admitting,
        move every session to another worker, withdraw the capacity record, deregister."""
        runtime = open_runtime(self.config.runtime)
        endpoint = runtime.endpoint(self.config.runtime.endpoint_path)
        self.instance_id = int(endpoint.connection_id())
        serving = asyncio.ensure_future(serve_control(endpoint, self.handler))
        publisher = asyncio.create_task(self.publish_forever())
        logger.info("worker %s serving as instance %d", self.config.key, self.instance_id)
        try:
            await self.stop.wait()
            moving = await self.daemon.drain()
            await self.directory.publish(self.record())  # draining: no gateway places here any more
            if moving:
                await self.move_sessions(moving, await ControlClient.open(runtime, self.config.runtime))
        finally:
            await stop(publisher)
            with contextlib.suppress(FleetError):
                await self.directory.withdraw(self.config.key)
            try:  # the runtime's own call: bounded, so a stuck discovery cannot keep a drained worker alive
                await asyncio.wait_for(endpoint.unregister_endpoint_instance(), UNREGISTER_TIMEOUT_S)
            except TimeoutError:
                logger.warning("worker %s: unregistering took over %.0f s; shutting the runtime down anyway",
                               self.config.key, UNREGISTER_TIMEOUT_S)
            runtime.shutdown()
            await asyncio.wait({serving}, timeout=5)
            if isinstance(self.directory, RedisDirectory):
                await self.directory.close()


async def _call(control: ControlClient, worker: WorkerCapacity, request: dict[str, Any]) -> dict[str, Any]:
    try:
        return await control.call(worker.instance_id, request)
    except Exception as exc:  # the runtime raises its own error types for a dead or slow instance
        raise WorkerUnreachable(f"{worker.worker} (instance {worker.instance_id}) failed: {exc}") from exc


async def serve_worker(daemon: FleetDaemon, config: WorkerConfig) -> FleetWorker:
    """Run a worker until SIGTERM or SIGINT, then drain and exit."""
    worker = FleetWorker(daemon, config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stop.set)
    await worker.run()
    return worker

