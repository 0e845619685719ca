"""A daemon for a measurement, started as a user starts one: `sessiond serve` in its own process on
a free port, with the flags of a `DaemonSpec`. Nothing of the client shares its interpreter (an
in-process daemon once shared the replayer's GIL and made stalls no real client saw)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from fleet.local import free_port
from loadtest._process import stop_process
from sessiond.admission.decision import Objectives

__all__ = ["DaemonSpec", "ServedDaemon", "serve_args", "served", "until_idle"]

_POLL_S = 0.25
_WARMING_UP = "warming up"  # /readyz's reason while the engine starts


@dataclass(frozen=True)
class DaemonSpec:
    """The `sessiond serve` flags of one measured daemon."""

    model: str = "tiny"
    device: str = "cpu"
    policy: str = "duty"
    max_batch: int = 8
    margin: float | None = None  # None: the daemon's default
    objectives: Objectives = field(default_factory=Objectives)
    kv_budget_bytes: int | None = None
    cpu_threads: int | None = None
    extra: tuple[str, ...] = ()  # further `serve` flags, as given


def serve_args(spec: DaemonSpec, port: int) -> list[str]:
    """The argument list after `sessiond serve`."""
    o = spec.objectives
    args = ["--host", "127.0.0.1", "--port", str(port), "--model", spec.model, "--device", spec.device,
            "--policy", spec.policy, "--max-batch", str(spec.max_batch),
            "--objective-world-miss-rate", str(o.world_deadline_miss),
            "--objective-world-a2p-p95-ms", str(o.world_action_to_photon_p95_ms),
            "--objective-director-start-delay-p95-s", str(o.director_start_delay_p95_s),
            "--log-level", "warning"]
    if spec.margin is not None:
        args += ["--admission-margin", str(spec.margin)]
    if spec.kv_budget_bytes is not None:
        args += ["--kv-budget-bytes", str(spec.kv_budget_bytes)]
    if spec.cpu_threads is not None:
        args += ["--cpu-threads", str(spec.cpu_threads)]
    return [*args, *spec.extra]


@dataclass
class ServedDaemon:
    url: str
    pid: int
    ready_after_s: float  # process start -> /readyz 200 (the start-up profile included)
    capacity: dict[str, Any]  # /v1/capacity as it answered once ready (the start-up calibration)


@contextlib.contextmanager
def served(spec: DaemonSpec, log_path: Path | None = None, *, ready_timeout_s: float = 300.0) -> Iterator[ServedDaemon]:
    """Starts `sessiond serve` with `spec`, yields once it is ready, stops it (SIGTERM) on exit."""
    port = free_port()
    command = [sys.executable, "-m", "sessiond.cli", "serve", *serve_args(spec, port)]
    with _log_file(log_path) as log:
        started = time.monotonic()
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        url = f"http://127.0.0.1:{port}"
        try:
            capacity = _wait_ready(proc, url, ready_timeout_s, log)
            yield ServedDaemon(url, proc.pid, round(time.monotonic() - started, 2), capacity)
        finally:
            stop_process(proc)


def _log_file(log_path: Path | None) -> IO[bytes]:
    """The daemon's log: the file asked for, else a temporary one (read back if it fails to start)."""
    return open(log_path, "w+b") if log_path is not None else tempfile.TemporaryFile()


def _tail(log: IO[bytes], lines: int = 5) -> str:
    log.seek(0)
    return "\n".join(log.read().decode(errors="replace").strip().splitlines()[-lines:])


def _wait_ready(proc: subprocess.Popen[bytes], url: str, timeout_s: float, log: IO[bytes]) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"sessiond serve exited with {proc.returncode} before it was ready; its last "
                               f"words:\n{_tail(log)}")
        with contextlib.suppress(httpx.HTTPError, ValueError):
            answer = httpx.get(f"{url}/readyz", timeout=2.0)
            if answer.status_code == 200:
                return dict(httpx.get(f"{url}/v1/capacity", timeout=5.0).json())
            reason = answer.json().get("reason")
            if reason and reason != _WARMING_UP:  # the engine failed to start: waiting will not help
                raise RuntimeError(f"sessiond serve at {url} will not become ready: {reason}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"sessiond serve at {url} was not ready after {timeout_s:.0f} s")
        time.sleep(_POLL_S)


async def until_idle(url: str, timeout_s: float = 60.0) -> bool:
    """Until the daemon at `url` holds no session (a replay's sessions closed); False if it still
    does after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=5.0) as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                if (await http.get(f"{url}/v1/capacity")).json()["sessions"]["total"] == 0:
                    return True
            await asyncio.sleep(0.5)
    return False
