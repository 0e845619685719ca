"""Fixtures for the fleet: worker processes on Dynamo's runtime with file discovery, over loopback."""

from __future__ import annotations

import contextlib
import os
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
