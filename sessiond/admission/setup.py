"""Wiring a policy into the daemon: calibrate on the engine thread, size the KV budget from the
pool, and feed the cost model from the scheduler's measured steps.

The daemon runs :func:`build_policy` through its engine worker after warm-up (it drives the
engine), then calls :func:`attach_to_scheduler`. Session events reach the duty tracker through
``policy.tracker``: ``begin(sid, now)`` when a world session plays (attached, not paused),
``begin(sid, now, media_s=seconds)`` when a director segment starts, ``end(sid, now)`` on
interrupt / detach / segment end, ``set_paused(sid, paused, now)`` on pause / resume. A session
never fed counts at its prior.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from engine.api import KVStats, StepResult
from sessiond.admission.calibrate import ProfileEngine, Progress, calibrate
from sessiond.admission.decision import KvBudget, Objectives
from sessiond.admission.duty import DutyPriors, DutyTracker
from sessiond.admission.factory import make_policy
from sessiond.admission.policy import PolicyBase

__all__ = ["attach_to_scheduler", "build_policy", "calibration_batches", "kv_budget_from_pool"]


def calibration_batches(max_batch: int, sessions_that_fit: int) -> tuple[int, ...]:
    """Powers of two up to max_batch (and max_batch itself), limited by what the pool holds."""
    top = max(1, min(max_batch, sessions_that_fit))
    out = {1 << i for i in range(int(math.log2(top)) + 1)} | {top}
    return tuple(sorted(out))


def kv_budget_from_pool(kv: KVStats, per_session_bytes: int, host_bytes: int | None = None) -> KvBudget:
    """Device bytes from the pool; host bytes for offloaded KV default to the same amount."""
    device = kv.slabs_total * kv.slab_bytes
    return KvBudget(device_bytes=device, host_bytes=device if host_bytes is None else host_bytes,
                    per_session_bytes=max(per_session_bytes, kv.slab_bytes))


def build_policy(name: str, engine: ProfileEngine, kv: KVStats | None, *, max_batch: int = 8,
                 objectives: Objectives | None = None, margin: float = 0.15, priors: DutyPriors | None = None,
                 duty_window_s: float = 60.0, host_bytes: int | None = None, chunks: int = 3,
                 progress: Progress | None = None, rounds: int = 2, time_budget_s: float | None = None,
                 **options: Any) -> PolicyBase:
    """Calibrate the cost model (`chunks` chunks at each batch size the pool can hold, within
    `time_budget_s` when given), then build the named policy with a KV budget taken from the pool.
    Runs on the engine thread."""
    per_session = engine.info.kv_bytes_per_session
    fit = max_batch if kv is None else max(1, (kv.slabs_free * kv.slab_bytes) // max(1, per_session))
    cost = calibrate(engine, batches=calibration_batches(max_batch, fit), chunks=chunks, rounds=rounds,
                     progress=progress, time_budget_s=time_budget_s)
    budget = None if kv is None else kv_budget_from_pool(kv, per_session, host_bytes)
    return make_policy(name, cost, DutyTracker(priors, duty_window_s), objectives=objectives, kv=budget,
                       margin=margin, max_batch=max_batch, **options)


def attach_to_scheduler(policy: PolicyBase, step_listeners: list[Callable[[StepResult], None]]) -> None:
    """Every measured engine step corrects the cost model (EWMA per bucket)."""
    step_listeners.append(policy.cost.observe_step)
