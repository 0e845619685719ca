"""The Dynamo runtime on this box: workers register under file discovery, a client lists their
instances and calls each one directly, and a SIGTERMed worker leaves discovery."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from fleet.runtime import ControlClient, RuntimeConfig, open_runtime

from .conftest import Processes, wait_for

pytestmark = pytest.mark.slow


def _registered(env: dict[str, str]) -> list[str]:
    instances = Path(env["DYN_FILE_KV"]) / "v1" / "instances"
    return sorted(os.listdir(instances)) if instances.is_dir() else []


def test_direct_calls_reach_each_worker_and_sigterm_deregisters(processes: Processes, discovery_env: dict[str, str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    a = processes.start("-m", "tests.fleet._echo_worker", "host1/cuda:0")
    b = processes.start("-m", "tests.fleet._echo_worker", "host1/cuda:1")
    wait_for(lambda: len(_registered(discovery_env)) == 2, 30, "two workers in file discovery")

    async def scenario() -> None:
        config = RuntimeConfig.from_env(discovery_env)
        for name, value in config.env().items():  # open_runtime sets these; restored after the test
            monkeypatch.setenv(name, value)
        runtime = open_runtime(config)
        try:
            control = await ControlClient.open(runtime, config, timeout_s=10)
            for _ in range(200):
                if len(control.instance_ids()) == 2:
                    break
                await asyncio.sleep(0.05)
            ids = control.instance_ids()
            assert len(ids) == 2
            replies = {i: await control.call(i, {"op": "ping", "n": i % 7}) for i in ids}
            assert sorted(r["worker"] for r in replies.values()) == ["host1/cuda:0", "host1/cuda:1"]
            for i, reply in replies.items():
                assert reply["instance_id"] == i
                assert reply["echo"] == {"op": "ping", "n": i % 7}
            # the same instance answers every direct call: no round robin behind our back
            first = ids[0]
            again = [(await control.call(first, {"op": "ping"}))["worker"] for _ in range(4)]
            assert again == [replies[first]["worker"]] * 4

            a.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(a.wait, 15) == 0
            for _ in range(200):
                if len(control.instance_ids()) == 1:
                    break
                await asyncio.sleep(0.05)
            (left,) = control.instance_ids()
            assert (await control.call(left, {"op": "ping"}))["worker"] == "host1/cuda:1"
        finally:
            runtime.shutdown()

    asyncio.run(scenario())
    assert len(_registered(discovery_env)) == 1
    b.send_signal(signal.SIGTERM)
    assert b.wait(15) == 0
    assert _registered(discovery_env) == []


def test_config_says_what_to_set() -> None:
    with pytest.raises(ValueError, match="file discovery needs file_dir"):
        RuntimeConfig(discovery="file")
    with pytest.raises(ValueError, match="etcd discovery needs etcd_endpoints"):
        RuntimeConfig(discovery="etcd")
    with pytest.raises(ValueError, match="discovery must be one of file, etcd"):
        RuntimeConfig(discovery="nats", file_dir="/x")
    env = RuntimeConfig(discovery="file", file_dir="/run/d", rpc_host="127.0.0.1").env()
    # every listener of the runtime binds --rpc-host: the request plane, the response streams a caller
    # opens, the system server and the event plane
    assert env == {"DYN_DISCOVERY_BACKEND": "file", "DYN_REQUEST_PLANE": "tcp", "DYN_FILE_KV": "/run/d",
                   "DYN_TCP_RPC_HOST": "127.0.0.1", "DYN_TCP_RESPONSE_STREAM_HOST": "127.0.0.1",
                   "DYN_SYSTEM_HOST": "127.0.0.1", "DYN_EVENT_PLANE_HOST": "127.0.0.1"}
