"""`sessiond serve --fleet`: the daemon's HTTP server and its fleet worker in one process. The worker
registers once the engine is warm, publishes capacity every second, answers the gateways' control
calls, and on SIGTERM (or a `drain` call) moves every session to another worker, tells each viewer
where to reconnect, deregisters; then the HTTP server stops. Imports the `fleet` package (and the
Dynamo runtime) only when called."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn

from sessiond.api.app import create_app
from sessiond.api.server import uvicorn_config
from sessiond.config import ServeConfig
from sessiond.errors import ServeConfigError
from sessiond.runtime.daemon import Daemon
from sessiond.runtime.handoff import checkpoint

__all__ = ["FleetOptions", "run_fleet_worker"]

logger = logging.getLogger(__name__)

_READY_POLL_S = 0.1


@dataclass(frozen=True)
class FleetOptions:
    """How a worker joins the fleet (flags of `sessiond serve --fleet`)."""

    discovery: str = "file"  # "file" (one host) | "etcd" (many hosts)
    discovery_dir: str = "/tmp/sessiond-discovery"
    etcd: str | None = None
    rpc_host: str | None = None  # the address the runtime's listeners bind (default: --host)
    public_url: str | None = None  # the worker's public HTTP base (default http://HOST:PORT)
    worker_key: str | None = None  # default: this host's name / the engine's device
    rack: str = ""
    checkpoint_s: float = 5.0  # snapshot generating sessions this often (a failover resumes from them)

    def check(self, config: ServeConfig) -> None:
        if not config.redis_url:
            raise ServeConfigError("redis_url", "fleet mode needs the shared Redis (the session directory and the "
                                   "durable records every worker resumes from): --redis-url redis://HOST:6379/0")
        if self.discovery not in ("file", "etcd"):
            raise ServeConfigError("discovery", f"must be file or etcd, got {self.discovery!r}")
        if self.discovery == "etcd" and not self.etcd:
            raise ServeConfigError("etcd", "etcd discovery needs the endpoints: --etcd http://10.0.0.5:2379")
        if self.worker_key is not None and "/" not in self.worker_key:
            raise ServeConfigError("worker_key", f"a worker key is host/device (e.g. node-3/cuda:1), got "
                                   f"{self.worker_key!r}")
        if not self.checkpoint_s > 0:
            raise ServeConfigError("checkpoint_s", f"must be > 0 seconds, got {self.checkpoint_s}")
        if config.host in ("0.0.0.0", "::") and self.public_url is None:
            raise ServeConfigError("public_url", f"--host {config.host} binds every address: name the one clients "
                                   "reach, e.g. --public-url http://10.0.0.7:8001")

    def base_url(self, config: ServeConfig) -> str:
        return (self.public_url or f"http://{config.host}:{config.port}").rstrip("/")


def _one_address(host: str) -> str | None:
    """--host as the runtime's address; None (the runtime picks a routable one) for every address."""
    return None if host in ("0.0.0.0", "::", "") else host


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: the worker owns SIGTERM/SIGINT (drain first)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _http(server: uvicorn.Server, sockets: list[socket.socket]) -> int:
    """Serve HTTP on the bound sockets; the exit status (uvicorn exits when it cannot serve, which a
    task must not raise)."""
    try:
        await server.serve(sockets=sockets)
    except SystemExit as exc:
        return int(exc.code or 1) if isinstance(exc.code, int | None) else 1
    return 0


async def _checkpoints(daemon: Daemon, every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        checkpoint(daemon)


async def _until_ready(daemon: Daemon, serving: asyncio.Task[int], stop: asyncio.Event) -> bool:
    while not daemon.ready:
        if daemon.warm_error is not None or serving.done() or stop.is_set():
            return False
        await asyncio.sleep(_READY_POLL_S)
    return True


async def _serve(config: ServeConfig, options: FleetOptions, sockets: list[socket.socket]) -> int:
    from fleet.runtime import RuntimeConfig
    from fleet.worker import FleetWorker, WorkerConfig, worker_key
    from sessiond.fleet_adapter.daemon import DaemonAdapter

    app = create_app(config)
    daemon: Daemon = app.state.daemon
    server = _Server(uvicorn_config(app, config))
    serving = asyncio.create_task(_http(server, sockets), name="sessiond-http")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        if not await _until_ready(daemon, serving, stop):
            why = daemon.warm_error or ("the HTTP server stopped" if serving.done() else "stopped before ready")
            logger.error("the worker did not join the fleet: %s", why)
            return 1
        runtime = RuntimeConfig(discovery=options.discovery,
                                file_dir=options.discovery_dir if options.discovery == "file" else None,
                                etcd_endpoints=options.etcd,
                                rpc_host=options.rpc_host or os.environ.get("DYN_TCP_RPC_HOST") or _one_address(config.host))
        key = options.worker_key or worker_key(daemon.host.info.device, socket.gethostname())
        worker = FleetWorker(DaemonAdapter(daemon), WorkerConfig(
            key=key, base_url=options.base_url(config), redis_url=str(config.redis_url), runtime=runtime,
            rack=options.rack))
        daemon.owns = worker.owns
        stop_task = asyncio.create_task(stop.wait())
        stop_task.add_done_callback(lambda _: worker.stop.set())
        checkpoints = asyncio.create_task(_checkpoints(daemon, options.checkpoint_s))
        logger.info("fleet worker %s at %s", key, worker.config.base_url)
        try:
            await worker.run()
        finally:
            stop_task.cancel()
            checkpoints.cancel()
        return 0
    finally:
        server.should_exit = True
        await serving


def run_fleet_worker(config: ServeConfig, options: FleetOptions, sockets: list[socket.socket]) -> int:
    """Run the daemon as a fleet worker on the bound `sockets` (`sessiond.api.listen`) until SIGTERM/SIGINT
    or a drain; returns the exit status."""
    options.check(config)
    return asyncio.run(_serve(config, options, sockets))
