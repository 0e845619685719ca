"""A fleet on this host for the fleet benchmarks: a private redis-server, `sessiond serve --fleet`
workers and a `sessiond gateway`, each its own process, on loopback with file discovery in a
temporary directory. Every process is ended (by its own pid) when the context exits."""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

__all__ = ["LocalFleet", "cpu_seconds", "free_port", "local_fleet", "provenance"]

_ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def provenance(command: str) -> dict[str, Any]:
    """Where a benchmark ran: commit (and whether tracked files differed), date, CPU, load, command."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=_ROOT).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), platform.processor())
    return {"git_commit": git("rev-parse", "HEAD"), "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "date_utc": datetime.now(UTC).isoformat(timespec="seconds"), "cpu": cpu_model, "cpu_count": os.cpu_count(),
            "load_avg_at_start": os.getloadavg(), "python": platform.python_version(), "command": command}


@dataclass
class LocalFleet:
    workdir: Path
    redis_url: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    workers: dict[str, tuple[subprocess.Popen[bytes], str]] = field(default_factory=dict)  # key -> (proc, url)
    gateway: tuple[subprocess.Popen[bytes], str] | None = None

    def _start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": str(_ROOT), "DYN_LOG": "warn"}
        with open(self.workdir / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(argv, cwd=_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def start_redis(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed; install the redis-server package")
        port = free_port()
        self._start("redis", [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                              "--dir", str(self.workdir)])
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        _wait(lambda: _pong(port), 10, f"redis-server on {port}")

    def _discovery(self) -> list[str]:
        return ["--redis-url", self.redis_url, "--discovery-dir", str(self.workdir / "discovery"),
                "--rpc-host", "127.0.0.1"]

    def start_worker(self, key: str, *serve_args: str) -> str:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = self._start(f"worker-{key.replace('/', '_')}", [
            sys.executable, "-m", "sessiond.cli", "serve", "--fleet", "--port", str(port), "--worker-key", key,
            "--log-level", "warning", *self._discovery(), *serve_args])
        self.workers[key] = (proc, url)
        return url

    def start_gateway(self, *gateway_args: str) -> str:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        self.gateway = (self._start("gateway", [sys.executable, "-m", "sessiond.cli", "gateway", "--port", str(port),
                                                *self._discovery(), *gateway_args]), url)
        return url

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        """Until the gateway lists every started worker as live."""
        assert self.gateway is not None, "start the gateway first"
        url, want = self.gateway[1], sorted(self.workers)

        def all_live() -> bool:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"a fleet process exited ({proc.args!r}); see the logs in {self.workdir}")
            try:
                body = httpx.get(f"{url}/v1/capacity", timeout=2).json()
            except (httpx.HTTPError, ValueError):
                return False
            return sorted(w["worker"] for w in body.get("workers", []) if not w["draining"]) == want

        _wait(all_live, timeout_s, f"the gateway seeing workers {want}")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


@contextlib.contextmanager
def local_fleet(keep_logs: Path | None = None) -> Iterator[LocalFleet]:
    """A LocalFleet with Redis started; its logs go to `keep_logs` (else a temporary directory)."""
    workdir = keep_logs or Path(tempfile.mkdtemp(prefix="sessiond-fleet-"))
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "discovery").mkdir(exist_ok=True)
    fleet = LocalFleet(workdir)
    try:
        fleet.start_redis()
        yield fleet
    finally:
        fleet.stop()
        if keep_logs is None:
            shutil.rmtree(workdir, ignore_errors=True)


def _pong(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2) as s:
        s.sendall(b"PING\r\n")
        return s.recv(16).startswith(b"+PONG")
    return False


def _wait(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
