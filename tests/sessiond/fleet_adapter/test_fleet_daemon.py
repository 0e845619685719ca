"""The daemon's side of the fleet without processes: the capacity a worker publishes, read from
each admission policy's snapshot; the fleet options' checks; the commands fleet-up starts."""

from __future__ import annotations

import argparse

import pytest

from engine.api import KVStats
from sessiond.commands.fleet_up import plan
from sessiond.config import ServeConfig
from sessiond.errors import ServeConfigError
from sessiond.fleet_adapter.daemon import capacity_of
from sessiond.fleet_adapter.serve import FleetOptions


def _kv(free: int, slab_bytes: int = 100) -> KVStats:
    return KVStats(slab_bytes=slab_bytes, slabs_total=40, slabs_free=free, slabs_in_use=40 - free, slabs_offloaded=0,
                   bytes_in_use=0, bytes_offloaded=0, per_session={})


def test_kv_policy_headroom_is_the_share_of_sessions_still_free() -> None:
    snapshot = {"policy": "kv", "sessions": 1, "max_sessions": 4, "kv_slabs_free": 9, "kv_slabs_per_session": 2}
    cap = capacity_of(snapshot, sessions=1, kv=_kv(9), kv_bytes_per_session=200, draining=False)
    assert cap.headroom == {"world": 0.75, "director": 0.75}
    assert cap.cost == {"world": 0.25, "director": 0.25}
    assert (cap.kv_free_sessions, cap.sessions, cap.draining) == (4, 1, False)


def test_no_kv_room_means_no_headroom_whatever_the_sessions() -> None:
    snapshot = {"policy": "kv", "sessions": 1, "max_sessions": 64, "kv_slabs_free": 1, "kv_slabs_per_session": 2}
    cap = capacity_of(snapshot, sessions=1, kv=_kv(1), kv_bytes_per_session=200, draining=True)
    assert cap.headroom == {"world": 0.0, "director": 0.0}
    assert (cap.kv_free_sessions, cap.draining) == (0, True)


def test_duty_policy_headroom_is_the_load_budget_left_and_cost_the_prior_times_the_rate() -> None:
    snapshot = {"policy": "duty", "load_budget": 0.85, "predicted_load": 0.35, "expected_batch": 2, "sessions": 3,
                "priors": {"world_playing": 0.5, "world_paused": 0.05, "director": 0.25},
                "cost_model": {"cost_rate": {"1": 0.4, "2": 0.3}},
                "kv": {"max_total": 10}}
    cap = capacity_of(snapshot, sessions=3, kv=None, kv_bytes_per_session=200, draining=False)
    assert cap.headroom == {"world": pytest.approx(0.5), "director": pytest.approx(0.5)}
    assert cap.cost == {"world": pytest.approx(0.15), "director": pytest.approx(0.075)}
    assert cap.kv_free_sessions == 7


def test_max_sessions_caps_a_cost_policys_free_sessions() -> None:
    snapshot = {"policy": "duty", "load_budget": 0.85, "predicted_load": 0.35, "expected_batch": 2, "sessions": 3,
                "priors": {}, "cost_model": {"cost_rate": {"1": 0.4}}, "kv": {"max_total": 10}, "max_sessions": 5}
    cap = capacity_of(snapshot, sessions=3, kv=None, kv_bytes_per_session=200, draining=False)
    assert cap.kv_free_sessions == 2  # 5 - 3 open, under the KV budget's 7


def test_one_per_gpu_headroom_counts_its_slots() -> None:
    snapshot = {"policy": "one-per-gpu", "load_budget": 0.85, "predicted_load": 0.1, "expected_batch": 1,
                "sessions": 1, "gpus": 2, "priors": {}, "cost_model": {"cost_rate": {"1": 1.0}}, "kv": None}
    cap = capacity_of(snapshot, sessions=1, kv=_kv(40), kv_bytes_per_session=200, draining=False)
    assert cap.headroom == {"world": 0.5, "director": 0.5}
    assert cap.cost == {"world": 0.5, "director": 0.5}
    assert cap.kv_free_sessions == 20


@pytest.mark.parametrize(("config", "options", "option", "says"), [
    (ServeConfig(), FleetOptions(), "redis_url", "fleet mode needs the shared Redis"),
    (ServeConfig(redis_url="redis://r:6379/0"), FleetOptions(discovery="etcd"), "etcd", "--etcd http://"),
    (ServeConfig(redis_url="redis://r:6379/0"), FleetOptions(discovery="consul"), "discovery", "file or etcd"),
    (ServeConfig(redis_url="redis://r:6379/0"), FleetOptions(worker_key="gpu0"), "worker_key", "host/device"),
    (ServeConfig(redis_url="redis://r:6379/0", host="0.0.0.0"), FleetOptions(), "public_url", "--public-url http://"),
])
def test_fleet_options_name_what_to_change(config: ServeConfig, options: FleetOptions, option: str, says: str) -> None:
    with pytest.raises(ServeConfigError) as err:
        options.check(config)
    assert err.value.option == option
    assert says in str(err.value)


def test_fleet_options_default_public_url_is_the_bound_address() -> None:
    config = ServeConfig(redis_url="redis://r:6379/0", host="10.0.0.7", port=8003)
    FleetOptions().check(config)
    assert FleetOptions().base_url(config) == "http://10.0.0.7:8003"
    assert FleetOptions(public_url="https://w3.example/").base_url(config) == "https://w3.example"


def _up_args(**kw: object) -> argparse.Namespace:
    base = {"redis_url": "redis://127.0.0.1:6379/0", "host": "127.0.0.1", "port": 8000, "worker_port": 8001,
            "model": "demo", "cpu_workers": None, "discovery_dir": "/run/d", "serve_args": ["--policy", "duty"], "proxy": False}
    return argparse.Namespace(**{**base, **kw})


def test_fleet_up_starts_a_worker_per_gpu_then_the_gateway() -> None:
    fleet = plan(_up_args(), gpus=2, host_name="node")
    assert [w[w.index("--device") + 1] for w in fleet.workers] == ["cuda:0", "cuda:1"]
    assert [w[w.index("--worker-key") + 1] for w in fleet.workers] == ["node/cuda:0", "node/cuda:1"]
    assert [w[w.index("--port") + 1] for w in fleet.workers] == ["8001", "8002"]
    # the gateway's pages post WebRTC offers to the workers: the workers allow the gateway's origin
    assert [w[w.index("--cors-origins") + 1] for w in fleet.workers] == ["http://127.0.0.1:8000"] * 2
    assert all(w[-2:] == ["--policy", "duty"] and "--fleet" in w for w in fleet.workers)
    assert fleet.gateway[fleet.gateway.index("gateway"):] == [
        "gateway", "--host", "127.0.0.1", "--port", "8000", "--redis-url", "redis://127.0.0.1:6379/0",
        "--discovery-dir", "/run/d"]


def test_fleet_up_proxy_is_the_gateways_option() -> None:
    fleet = plan(_up_args(proxy=True), gpus=1, host_name="node")
    assert fleet.gateway[-1] == "--proxy"
    assert all("--proxy" not in w and "--cors-origins" not in w for w in fleet.workers)  # one origin


def test_fleet_up_cpu_workers_get_keys_of_their_own() -> None:
    fleet = plan(_up_args(cpu_workers=3), gpus=0, host_name="box")
    assert [w[w.index("--worker-key") + 1] for w in fleet.workers] == ["box/cpu-0", "box/cpu-1", "box/cpu-2"]
    assert {w[w.index("--device") + 1] for w in fleet.workers} == {"cpu"}
