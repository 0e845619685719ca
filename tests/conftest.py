"""Shared fixtures: a free port, a real redis-server on a free port (killable, restartable), and
the real daemon (tiny engine) under uvicorn on a free port, in this process or as a subprocess.

An in-process daemon runs its own event loop in a thread of its own; async tests run on the loop
pytest-asyncio gives each test and reach the daemon over loopback, never through its loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from loadtest._process import stop_process

ROOT = Path(__file__).resolve().parents[1]
# every daemon a test starts decides from its own profile alone: a user's start history
# (sessiond/admission/start_verdict.py) must not carry one test's verdict into another
os.environ["SESSIOND_START_HISTORY"] = "off"
T = TypeVar("T")


def find_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def free_port() -> int:
    return find_free_port()


class RedisServer:
    """A redis-server the test owns: killable (SIGKILL) and restartable on its port; no persistence
    unless `appendonly` (then every write is fsynced to the append-only file and survives a restart)."""

    def __init__(self, port: int, *, appendonly: bool = False) -> None:
        self.port = port
        self.appendonly = appendonly
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.mkdtemp(prefix="sessiond-redis-")

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed; install the redis-server package")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes" if self.appendonly else "no", "--appendfsync", "always",
             "--dir", self._dir, "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self._dir, ignore_errors=True)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer(find_free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class RunningDaemon:
    url: str
    app: Any
    server: Any
    thread: threading.Thread

    @property
    def daemon(self) -> Any:
        return self.app.state.daemon

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)

    def wait_ready(self) -> None:
        wait_ready(self.url)


_ENGINE: dict[str, Any] = {}


def tiny_engine(slot: str = "private") -> Any:
    """A warm tiny engine per slot and test process. The session-wide `daemon` fixture has the
    "shared" slot; daemons a test starts for itself (one at a time) reuse the "private" one, and
    close their sessions on stop. Two daemons never drive one engine at the same time."""
    if slot not in _ENGINE:
        from engine.engine import Engine

        engine = Engine.create(model="tiny", device="cpu", kv_budget_bytes=4 << 20)  # room for 300 sessions
        engine.warmup()
        _ENGINE[slot] = engine
    return _ENGINE[slot]


@contextlib.contextmanager
def running_daemon(engine: Any = None, *, fresh_engine: bool = False, wait: bool = True,
                   **options: Any) -> Iterator[RunningDaemon]:
    """The real app under a real uvicorn server on a free port, in a thread of this process."""
    import uvicorn

    from sessiond.api.app import create_app
    from sessiond.api.server import uvicorn_config
    from sessiond.config import ServeConfig

    options.setdefault("model", "tiny")
    options.setdefault("port", find_free_port())
    config = ServeConfig.from_mapping(options)
    if engine is None and not fresh_engine:
        engine = tiny_engine()
    app = create_app(config, engine)
    server = uvicorn.Server(uvicorn_config(app, config, log_level="warning"))
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{config.port}"
    running = RunningDaemon(url, app, server, thread)
    try:
        if wait:
            wait_ready(url)
        else:
            wait_listening(config.port)
        yield running
    finally:
        running.stop()


def wait_ready(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return
        time.sleep(0.05)
    raise RuntimeError(f"daemon at {url} not ready within {timeout_s} s")


def wait_listening(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on port {port} after {timeout_s} s")


@contextlib.asynccontextmanager
async def off_loop(blocking: contextlib.AbstractContextManager[T]) -> AsyncIterator[T]:
    """A blocking context manager (a daemon or redis-server starting and stopping) entered and
    left in a worker thread, so an async test's event loop never waits on it."""
    value = await asyncio.to_thread(blocking.__enter__)
    try:
        yield value
    except BaseException as exc:
        if not await asyncio.to_thread(blocking.__exit__, type(exc), exc, exc.__traceback__):
            raise
    else:
        await asyncio.to_thread(blocking.__exit__, None, None, None)


@pytest.fixture(scope="session")
def daemon() -> Iterator[RunningDaemon]:
    """A shared daemon with default settings and the tiny model."""
    with running_daemon(tiny_engine("shared")) as running:
        yield running


@contextlib.contextmanager
def daemon_process(*args: str, port: int | None = None, log: Path | None = None
                   ) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`sessiond serve --model tiny` as a real process (for restart tests); its output goes to
    `log` (a file, so a chatty daemon never blocks on a full pipe)."""
    port = port or find_free_port()
    out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([sys.executable, "-m", "sessiond.cli", "serve", "--model", "tiny", "--device", "cpu",
                             "--port", str(port), *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, 120)
        yield url, proc
    finally:
        stop_process(proc)
        if log is not None:
            out.close()  # type: ignore[union-attr]


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """An ASGI app under a real uvicorn server on a free loopback port, in this event loop; its URL."""
    import uvicorn

    port = find_free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
