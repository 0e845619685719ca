"""`build_admission`: the one place the daemon's policy is built from its config."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from engine.api import KVStats, ModelInfo
from sessiond.admission import CostModel, DutyPolicy, FifoPolicy, KVPoolAdmission, PolicyBase, build_admission
from sessiond.config import ServeConfig
from tests.sessiond.admission.factories import known_cost, model_info


def _kv(slabs_free: int) -> KVStats:
    return KVStats(slab_bytes=500, slabs_total=8, slabs_free=slabs_free, slabs_in_use=8 - slabs_free,
                   slabs_offloaded=0, bytes_in_use=0, bytes_offloaded=0, per_session={})


class _Host:
    """What building a policy needs of the engine host; records the profile it was asked for."""

    def __init__(self, slabs_free: int = 6) -> None:
        self.info: ModelInfo = model_info(kv_bytes=1000)  # 2 slabs a session
        self._slabs_free = slabs_free
        self.profiles: list[dict[str, Any]] = []
        self.chunk_seconds = 0.5  # engine seconds per media second at batch 1
        self.enough: list[bool] = []  # what the build's `enough` answered after batch 1 and batch 2

    def context_chunks(self) -> int:
        return 3

    async def kv_stats(self) -> KVStats:
        return _kv(self._slabs_free)

    async def calibrate(self, *, batches: Sequence[int], chunks: int, rounds: int,
                        time_budget_s: float | None, context_chunks: int | None = None,
                        steady_chunks: int = 0, cpu_time: bool = False,
                        enough: Callable[[int, CostModel], bool] | None = None) -> CostModel:
        self.profiles.append({"batches": tuple(batches), "chunks": chunks, "rounds": rounds,
                              "time_budget_s": time_budget_s, "context_chunks": context_chunks,
                              "steady_chunks": steady_chunks, "cpu_time": cpu_time})
        cost = known_cost(self.chunk_seconds)
        if enough is not None:
            self.enough = [enough(1, cost), enough(2, cost)]
        return cost


async def test_the_kv_policy_needs_no_profile() -> None:
    host = _Host()
    runtime = await build_admission(ServeConfig(model="tiny", policy="kv"), host, CollectorRegistry(), lambda: _kv(6))
    assert isinstance(runtime.policy, KVPoolAdmission) and runtime.measured is None
    assert (host.profiles, runtime.scheduling, runtime.refresh({})) == ([], "deadline", [])


async def test_a_cost_model_policy_is_profiled_within_the_pool_and_the_budget() -> None:
    host = _Host(slabs_free=6)  # 3 sessions fit: batches 1, 2 and 3 (max_batch 8)
    config = ServeConfig(model="tiny", policy="fifo", calibration_budget_s=12.0, cpu_threads=1)
    runtime = await build_admission(config, host, CollectorRegistry(), lambda: None)
    # 3 context chunks: the profile runs 4 chunks, so the last one attends to a full context (the steady
    # cost), then 12 more at batch 1 (12 / b at batch b) at that full context, filed under it; a CPU
    # engine on one thread is profiled by its thread's CPU time
    assert host.profiles == [{"batches": (1, 2, 3), "chunks": 4, "rounds": 1, "time_budget_s": 12.0,
                              "context_chunks": 3, "steady_chunks": 12, "cpu_time": True}]
    assert isinstance(runtime.policy, FifoPolicy) and runtime.measured is runtime.policy
    assert runtime.scheduling == "fifo"
    await build_admission(dataclasses.replace(config, cpu_threads=2), host, CollectorRegistry(), lambda: None)
    assert host.profiles[1]["cpu_time"] is False  # two threads: the other one's CPU time is not this thread's
    snapshot = runtime.policy.snapshot(0.0)
    assert (snapshot["policy"], snapshot["kv"]["device_bytes"], snapshot["kv"]["per_session_bytes"]) == (
        "fifo", 4000, 1000)


async def test_duty_is_the_default_and_takes_the_configured_objectives() -> None:
    host = _Host(slabs_free=6)
    config = ServeConfig(model="tiny", objective_director_start_delay_p95_s=2.5, objective_world_miss_rate=0.02,
                         admission_margin=0.2, default_segment_s=4.0)
    runtime = await build_admission(config, host, CollectorRegistry(), lambda: None)
    assert isinstance(runtime.policy, DutyPolicy) and runtime.measured is runtime.policy
    assert host.profiles[0]["batches"] == (1, 2, 3)
    policy = runtime.policy
    assert (policy.objectives.director_start_delay_p95_s, policy.objectives.world_deadline_miss) == (2.5, 0.02)
    assert (policy.margin, policy.segment_s) == (0.2, 4.0)


async def test_a_cost_model_policy_takes_the_configured_max_sessions() -> None:
    for name in ("duty", "fifo", "one-per-gpu"):
        runtime = await build_admission(ServeConfig(model="tiny", policy=name, max_sessions=3), _Host(),
                                        CollectorRegistry(), lambda: None)
        assert isinstance(runtime.policy, PolicyBase)
        assert (runtime.policy.max_sessions, runtime.policy.snapshot(0.0)["max_sessions"]) == (3, 3)
    default = await build_admission(ServeConfig(model="tiny"), _Host(), CollectorRegistry(), lambda: None)
    assert isinstance(default.policy, PolicyBase) and default.policy.max_sessions == 64


async def test_a_start_that_cannot_serve_one_session_of_either_mode_profiles_no_larger_batch() -> None:
    cheap, dear = _Host(slabs_free=6), _Host(slabs_free=6)
    dear.chunk_seconds = 2.0  # a session needs 2 engine seconds a media second: past 1.5 x the budget (0.85)
    config = ServeConfig(model="tiny", start_history="")
    await build_admission(config, cheap, CollectorRegistry(), lambda: None)
    runtime = await build_admission(config, dear, CollectorRegistry(), lambda: None)
    assert (cheap.enough, dear.enough) == ([False, False], [True, False])  # asked after batch 1 only
    assert isinstance(runtime.policy, DutyPolicy) and runtime.policy.start_verdict is not None
    assert runtime.policy.start_verdict.serves == {"world": 0, "director": 0}
