"""The one place admission policies are built: by name (`make_policy`), and for the daemon from
its config (`build_admission`): `kv` is the KV-pool check; `duty`, `one-per-gpu` and `fifo`
are cost-model policies, whose cost model is calibrated through the engine at start-up (through
the model's whole attention context, within `calibration_budget_s`) and sized to the KV pool."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from engine.api import KVStats, ModelInfo
from sessiond.admission.baselines import FifoPolicy, OnePerGpuPolicy
from sessiond.admission.costmodel import CostModel
from sessiond.admission.decision import KvBudget, Objectives
from sessiond.admission.duty import DutyTracker
from sessiond.admission.errors import AdmissionConfigError
from sessiond.admission.kvpool import KVPoolAdmission
from sessiond.admission.metrics import AdmissionMetrics
from sessiond.admission.policy import DutyPolicy, PolicyBase
from sessiond.admission.runtime import AdmissionRuntime
from sessiond.admission.start_verdict import StartHistory, fingerprint, settle_verdict
from sessiond.admission.summary import MODES, serves_of
from sessiond.config import ServeConfig

__all__ = ["POLICIES", "Calibrator", "build_admission", "calibration_batches", "kv_budget_from_pool",
           "make_policy", "objectives_of"]

logger = logging.getLogger(__name__)

POLICIES: dict[str, type[PolicyBase]] = {"duty": DutyPolicy, "one-per-gpu": OnePerGpuPolicy, "fifo": FifoPolicy}

# chunks at the full context profiled beyond the first pass (a batch of b runs 1/b of them): the
# steady bucket's lower quartile then repeats from start to start (docs/performance.md, "Admission")
STEADY_CHUNKS = 12
# a start whose profile at batch 1 puts one session of each mode past this many times its budget
# serves none under any reading of the start-to-start spread (at most 25%): it profiles no further
HOPELESS = 1.5


class Calibrator(Protocol):
    """What building a cost-model policy needs of the engine (the daemon's EngineHost)."""

    @property
    def info(self) -> ModelInfo: ...

    def context_chunks(self) -> int: ...

    async def kv_stats(self) -> KVStats: ...

    async def calibrate(self, *, batches: Sequence[int], chunks: int, rounds: int,
                        time_budget_s: float | None, context_chunks: int | None = None,
                        steady_chunks: int = 0, cpu_time: bool = False,
                        enough: Callable[[int, CostModel], bool] | None = None) -> CostModel: ...


def make_policy(name: str, cost: CostModel, tracker: DutyTracker | None = None, **options: Any) -> PolicyBase:
    """A cost-model policy by name; options are PolicyBase's keywords (and ``gpus`` for one-per-gpu)."""
    cls = POLICIES.get(name)
    if cls is None:
        raise AdmissionConfigError("policy", f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
    if "gpus" in options and cls is not OnePerGpuPolicy:
        options = {k: v for k, v in options.items() if k != "gpus"}
    return cls(cost, tracker or DutyTracker(), **options)


def calibration_batches(max_batch: int, sessions_that_fit: int, device: str = "cuda") -> tuple[int, ...]:
    """Powers of two up to max_batch (and max_batch itself), limited by what the pool holds. On a
    CPU only 1, 2 and the largest: a CPU's step grows about linearly with the batch (no batching
    gain to find between), and each batch size profiled costs seconds of start-up (the demo
    model's batch 4 took 5 of the 18.6 s the profile took on the 2-core box)."""
    top = max(1, min(max_batch, sessions_that_fit))
    if device == "cpu":
        return tuple(sorted({1, min(2, top), top}))
    out = {1 << i for i in range(int(math.log2(top)) + 1)} | {top}
    return tuple(sorted(out))


def kv_budget_from_pool(kv: KVStats, per_session_bytes: int, host_bytes: int | None = None) -> KvBudget:
    """Device bytes from the pool; host bytes for offloaded KV default to the same amount."""
    device = kv.slabs_total * kv.slab_bytes
    return KvBudget(device_bytes=device, host_bytes=device if host_bytes is None else host_bytes,
                    per_session_bytes=max(per_session_bytes, kv.slab_bytes))


def objectives_of(config: ServeConfig) -> Objectives:
    """The objectives the daemon promises, from its configuration."""
    return Objectives(world_deadline_miss=config.objective_world_miss_rate,
                      world_action_to_photon_p95_ms=config.objective_world_a2p_p95_ms,
                      director_start_delay_p95_s=config.objective_director_start_delay_p95_s,
                      director_tail=config.objective_director_risk)


async def build_admission(config: ServeConfig, host: Calibrator, registry: Any,
                          kv_now: Callable[[], KVStats | None]) -> AdmissionRuntime:
    """The policy `config.policy` names. `kv_now` is the latest KV pool accounting (for `kv`)."""
    if config.policy == "kv":
        return AdmissionRuntime(KVPoolAdmission(host.info, kv_now, config.max_sessions))
    started = time.monotonic()
    kv = await host.kv_stats()
    per_session = host.info.kv_bytes_per_session
    fit = max(1, (kv.slabs_free * kv.slab_bytes) // max(1, per_session))
    # contexts 0 .. sink + window: a chunk reaches the steady cost only once sink + window chunks
    # precede it, and admission plans every session at that steady cost
    context = host.context_chunks()
    chunks = context + 1
    # a CPU engine on one torch thread computes on the engine thread alone: its profile counts that
    # thread's CPU time, so other load on the machine does not move the verdict from start to start;
    # a paced engine's steps are mostly waiting (sessiond/runtime/paced_engine.py): wall time, as on a GPU
    cpu_time = host.info.device == "cpu" and config.engine_threads("cpu") == 1 and config.pace_profile is None
    # the world lead's ceiling, which a world session plays with while others are open (session.lead)
    lead_chunks = config.lead_chunks if config.lead_chunks is not None else host.info.lead_chunks
    world_lead_s = lead_chunks * host.info.frames_per_chunk / host.info.fps

    def policy_of(cost: CostModel) -> PolicyBase:
        return make_policy(config.policy, cost, DutyTracker(), kv=kv_budget_from_pool(kv, per_session),
                           max_batch=config.max_batch, margin=config.admission_margin,
                           objectives=objectives_of(config), segment_s=config.default_segment_s,
                           max_sessions=config.max_sessions, world_lead_s=world_lead_s)

    def hopeless(batch: int, cost: CostModel) -> bool:
        """After batch 1: one session of either mode alone needs more than HOPELESS times the engine
        time this start may plan: no reading of this machine's profile serves a session, so the
        larger batches need not be profiled (the newcomer hears so sooner)."""
        if batch != 1:
            return False
        model = policy_of(cost).group_model()
        return all(model.alone(mode)[1] > HOPELESS * model.budget for mode in MODES)

    cost = await host.calibrate(batches=calibration_batches(config.max_batch, fit, host.info.device), chunks=chunks, rounds=1,
                                time_budget_s=config.calibration_budget_s, context_chunks=context,
                                steady_chunks=STEADY_CHUNKS, cpu_time=cpu_time, enough=hopeless)
    logger.info("cost model calibrated through %d chunks (+%d at the full context) in %.1f s, by %s time "
                "(wall / CPU time %.2f)", chunks, STEADY_CHUNKS, time.monotonic() - started, cost.profile_clock,
                cost.contention or float("nan"))
    policy = policy_of(cost)
    if cost.calibrated():
        settle_start_verdict(policy, config, host.info)
    return AdmissionRuntime(policy, measured=policy, metrics=AdmissionMetrics(registry))


def settle_start_verdict(policy: PolicyBase, config: ServeConfig, info: ModelInfo) -> None:
    """Read the profile so that this start's verdict agrees with this machine's earlier starts where
    it sits at its edge (`sessiond.admission.start_verdict`); the result lands on `policy.start_verdict`."""
    def serves_at(scales: Mapping[int, float]) -> dict[str, int]:
        policy.cost.set_profile_scale(scales)
        return serves_of(policy)

    try:
        import torch

        torch_version = torch.__version__
    except ImportError:  # pragma: no cover - the engine needs torch
        torch_version = None
    settings = {"model": info.name, "device": info.device, "threads": config.engine_threads(info.device),
                "policy": config.policy, "max_batch": config.max_batch, "max_sessions": config.max_sessions,
                "margin": config.admission_margin, "objectives": objectives_of(config), "torch": torch_version,
                "strategy": config.strategy, "profile_clock": policy.cost.profile_clock}
    if config.attention != "auto":  # another kernel is another machine's profile (auto keeps older records' key)
        settings["attention"] = config.attention
    history = StartHistory(Path(config.start_history)) if config.start_history else None
    policy.cost.set_profile_scale({})
    costs = {b: policy.cost.cost_rate(b) for b in policy.cost.profiled_batches()}
    verdict = settle_verdict(costs, serves_at, policy.cost.set_profile_scale, history,
                             fingerprint(settings))
    policy.start_verdict = verdict
    logger.info("start verdict %s (%s; %d start(s) on record%s)", verdict.serves, verdict.phrase(), verdict.starts,
                f" in {verdict.history}" if verdict.history else ", no history")
