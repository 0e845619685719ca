"""Fixtures for the fleet: worker processes on Dynamo's runtime with file discovery, over loopback."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import RedisServer, find_free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def discovery_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a one-host fleet: file discovery in a fresh directory, loopback only."""
    env = dict(os.environ)
    env.update({"DYN_DISCOVERY_BACKEND": "file", "DYN_FILE_KV": str(tmp_path / "discovery"),
                "DYN_TCP_RPC_HOST": "127.0.0.1", "DYN_LOG": "warn", "PYTHONPATH": str(ROOT)})
    return env


class Processes:
    """Subprocesses a test starts; each is ended by its own pid when the test ends."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        """Start `python ARGS`; its output goes to a log file named for its position."""
        with open(self.logs / f"proc{len(self.procs)}.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=self.env, stdout=log,
                                    stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def log(self, index: int) -> str:
        return (self.logs / f"proc{index}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


@pytest.fixture
def processes(discovery_env: dict[str, str], tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(discovery_env, tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()


def wait_for(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@contextlib.contextmanager
def append_only_redis() -> Iterator[RedisServer]:
    """A redis-server with append-only persistence on a free port (survives its own restart)."""
    server = RedisServer(find_free_port(), appendonly=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class EtcdServer:
    """An etcd (Debian's etcd-server) on free loopback ports with its own data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.port, self.peer_port = find_free_port(), find_free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        peer = f"http://127.0.0.1:{self.peer_port}"
        self.proc = subprocess.Popen(
            ["etcd", "--name", "t", "--data-dir", str(self.data_dir), "--listen-client-urls", self.url,
             "--advertise-client-urls", self.url, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"t={peer}", "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: _answers(f"{self.url}/health"), 30, f"etcd on {self.url}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def etcd_server(tmp_path: Path) -> Iterator[EtcdServer]:
    if shutil.which("etcd") is None:
        raise RuntimeError("etcd is not installed; install Debian's etcd-server package (scripts/test.sh does)")
    server = EtcdServer(tmp_path / "etcd")
    server.start()
    try:
        yield server
    finally:
        server.stop()
