"""Every listener of every fleet role is on the address its flags name: two `sessiond serve --fleet`
workers, a gateway and a `sessiond drain` (which moves a streaming session, so the drained worker
calls the other one), all started with loopback flags and no DYN_* address variable in their
environment. Their listening sockets are read from /proc/net/tcp{,6} (inodes mapped through
/proc/PID/fd) all along the drain; any address other than 127.0.0.1 fails the test."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from fleet.runtime import ADDRESS_VARIABLES
from protocols.client import SessionClient
from sessiond.api.listen import listeners
from tests.conftest import RedisServer

from ._fleet import WORKER_TIMEOUT_S, Fleet, Stream, live_workers, until
from .conftest import ROOT, Processes

pytestmark = [pytest.mark.slow, pytest.mark.redis]

KEYS = ["h1/cpu-0", "h1/cpu-1"]


def _seen(pids: list[int], into: dict[int, set[tuple[str, int]]]) -> None:
    for pid in pids:
        into.setdefault(pid, set()).update(listeners(pid))


async def test_every_fleet_role_listens_only_where_its_flags_say(
        processes: Processes, redis_server: RedisServer, discovery_env: dict[str, str]) -> None:
    for name in ADDRESS_VARIABLES:  # the flags must pin them, not the test's environment
        processes.env.pop(name, None)
    fleet = Fleet(processes, redis_server.url, discovery_env["DYN_FILE_KV"])
    for key in KEYS:
        fleet.start_worker(key, "--host", "127.0.0.1", "--max-sessions", "4")
    gw = fleet.start_gateway("--host", "127.0.0.1")

    async def sees_all() -> bool:
        return await live_workers(gw) == KEYS
    await until(sees_all, WORKER_TIMEOUT_S, f"gateway {gw} seeing {KEYS}")

    client = SessionClient(timeout_s=10)
    await client.create(gw, "world")
    await client.connect()
    stream = Stream(client)
    seen: dict[int, set[tuple[str, int]]] = {}
    try:
        await stream.read(4)
        draining = fleet.key_of(client.session.ws_url)  # type: ignore[union-attr]
        reading = asyncio.create_task(stream.read(10**9))
        drain = subprocess.Popen(
            [sys.executable, "-m", "sessiond.cli", "drain", "--redis-url", fleet.redis_url, "--discovery-dir",
             fleet.discovery_dir, "--rpc-host", "127.0.0.1", "--worker", draining, "--wait-s", "30"],
            cwd=ROOT, env=processes.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        pids = [p.pid for p in processes.procs] + [drain.pid]
        deadline = time.monotonic() + 60
        while drain.poll() is None and time.monotonic() < deadline:  # sample all along the drain
            _seen(pids, seen)
            await asyncio.sleep(0.02)
        output = drain.communicate(timeout=10)[0].decode()
        assert drain.returncode == 0, output
        assert f"{stream.sid} -> " in output
        async def told() -> bool:
            assert not reading.done(), (reading.exception(), output)
            return len(stream.moves) == 1
        await until(told, 20, "the viewer told where it moved")
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)
        _seen(pids, seen)
    finally:
        await client.aclose()

    gateway_port = int(gw.rsplit(":", 1)[1])
    by_role = {"worker " + k: seen[fleet.workers[k].pid] for k in KEYS}
    by_role["gateway"] = seen[fleet.gateways[0][0].pid]
    by_role["drain"] = seen[drain.pid]
    elsewhere = {role: sorted(s for s in socks if s[0] != "127.0.0.1") for role, socks in by_role.items()}
    assert elsewhere == {role: [] for role in by_role}, f"listeners on addresses no flag named: {elsewhere}"
    for key in KEYS:  # each worker's HTTP port, and its request plane next to it
        assert ("127.0.0.1", fleet.ports[key]) in by_role["worker " + key]
        assert len(by_role["worker " + key]) >= 2, by_role
    assert ("127.0.0.1", gateway_port) in by_role["gateway"]
    assert by_role["drain"], "the drain's response stream listener was never seen"
    print({role: sorted(socks) for role, socks in by_role.items()})
