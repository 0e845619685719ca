"""A fleet process whose port is taken exits at once (non-zero, the error naming the port and the
process holding it) instead of running without serving; fleet-up stops the rest of its fleet when
one of its children fails; a gateway ends on SIGTERM within its bound. Real processes, a real
redis-server, Dynamo file discovery, loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from fleet.gateway_cli import GRACEFUL_SHUTDOWN_S
from fleet.tasks import STOP_WITHIN_S
from tests.conftest import RedisServer, find_free_port

from .conftest import ROOT, Processes, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis]

EXIT_WITHIN_S = 2.0  # the target: a process that cannot bind its port is gone this soon


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port this test process listens on."""
    with socket.create_server(("127.0.0.1", 0)) as held:
        yield held.getsockname()[1]


def _run(args: list[str], env: dict[str, str], timeout_s: float = 30) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "sessiond.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout_s)
    return done, time.monotonic() - started


@pytest.mark.parametrize("command", ["serve", "serve --fleet", "gateway"])
def test_a_taken_port_ends_the_process_at_once_naming_port_and_holder(
        command: str, taken: int, redis_server: RedisServer, discovery_env: dict[str, str]) -> None:
    args = [*command.split(), "--port", str(taken), "--redis-url", redis_server.url]
    args += ["--model", "tiny", "--device", "cpu"] if command.startswith("serve") else \
        ["--discovery-dir", discovery_env["DYN_FILE_KV"]]
    done, took = _run(args, discovery_env)
    assert done.returncode == 2, done.stdout + done.stderr
    prog = "sessiond gateway" if command == "gateway" else "sessiond serve"
    assert (f"{prog}: config option `port`: port {taken} on 127.0.0.1 is already in use "
            f"(held by pid {os.getpid()} (") in done.stdout
    assert took < EXIT_WITHIN_S, f"{command} took {took:.2f} s to give up on a taken port"


def test_fleet_up_stops_its_fleet_when_the_gateway_cannot_bind(
        taken: int, redis_server: RedisServer, discovery_env: dict[str, str]) -> None:
    worker_port = find_free_port()
    done, took = _run(["fleet-up", "--redis-url", redis_server.url, "--cpu-workers", "1", "--model", "tiny",
                       "--port", str(taken), "--worker-port", str(worker_port),
                       "--discovery-dir", discovery_env["DYN_FILE_KV"]], discovery_env, timeout_s=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"port {taken} on 127.0.0.1 is already in use" in done.stdout
    assert (f"sessiond fleet-up: the gateway on port {taken} exited with status 2; stopping the others"
            in done.stderr)
    with socket.create_server(("127.0.0.1", worker_port)):  # the worker is gone: its port is free again
        pass
    print(f"fleet-up gave up after {took:.1f} s")


def test_the_gateway_module_on_a_taken_port_exits_instead_of_sweeping_on(
        taken: int, redis_server: RedisServer, discovery_env: dict[str, str]) -> None:
    # `python -m fleet.gateway_cli` lets uvicorn bind after the lifespan started the failover
    # sweeper: its stop must end the process even when Redis swallows the sweeper's cancellation
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "fleet.gateway_cli", "--port", str(taken), "--redis",
                           redis_server.url, "--discovery-dir", discovery_env["DYN_FILE_KV"], "--sweep-s", "0.01"],
                          cwd=ROOT, env=discovery_env, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    assert done.returncode == 3, done.stdout + done.stderr  # uvicorn's start-up failure
    assert "address already in use" in done.stderr
    assert took < 10, f"{took:.1f} s"


def test_sigterm_ends_every_gateway_within_its_bound(processes: Processes, redis_server: RedisServer,
                                                     discovery_env: dict[str, str]) -> None:
    bound_s = GRACEFUL_SHUTDOWN_S + STOP_WITHIN_S + 2
    gateways = []
    for _ in range(3):  # sweeping every 10 ms: the SIGTERM lands while a sweep talks to Redis
        port = find_free_port()
        proc = processes.start("-m", "sessiond.cli", "gateway", "--port", str(port), "--redis", redis_server.url,
                               "--discovery-dir", discovery_env["DYN_FILE_KV"], "--sweep-s", "0.01")
        gateways.append((proc, f"http://127.0.0.1:{port}"))
    for _, url in gateways:
        wait_for(lambda url=url: _answers(f"{url}/healthz"), 60, f"gateway {url}")
    time.sleep(0.5)
    for proc, _ in gateways:
        proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    for proc, url in gateways:
        try:
            code = proc.wait(max(0.1, bound_s - (time.monotonic() - sent)))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"gateway {url} still runs {bound_s} s after SIGTERM") from None
        assert code == -signal.SIGTERM  # shut down cleanly, then uvicorn re-raises the signal it caught
    print(f"3 gateways ended {time.monotonic() - sent:.2f} s after SIGTERM")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
