"""Wiring `--policy duty|one-per-gpu|fifo` (sessiond.admission) into the daemon: calibrate the
cost model on the engine thread at start-up, feed it measured steps, feed the duty tracker each
session's demand, publish its metrics, and apply its overrun decisions."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from engine.api import EngineProtocol, KVStats
from sessiond.admission import AdmissionMetrics, DutyTracker, KvBudget, PolicyBase, calibrate, make_policy
from sessiond.config import ServeConfig
from sessiond.engine_worker import EngineWorker

__all__ = ["PolicyRuntime", "build_policy"]

logger = logging.getLogger(__name__)


@dataclass
class PolicyRuntime:
    policy: PolicyBase
    metrics: AdmissionMetrics

    def on_demand(self, session_id: str, demanding: bool, media_s: float | None) -> None:
        tracker = self.policy.tracker
        if session_id not in tracker:
            return
        now = time.monotonic()
        if demanding:
            tracker.begin(session_id, now, media_s)
        else:
            tracker.end(session_id, now)

    def refresh(self) -> list[Any]:
        """Update the gauges; the overrun actions to apply now."""
        now = time.monotonic()
        self.metrics.update(self.policy, now)
        actions = self.policy.overruns(now)
        self.metrics.record_overruns(actions)
        return actions


async def build_policy(config: ServeConfig, engine: EngineProtocol, worker: EngineWorker, registry: Any,
                       kv: KVStats) -> PolicyRuntime:
    """Calibrate (a short profile on the engine thread, logged as progress) and build the policy."""
    started = time.monotonic()
    batches = tuple(b for b in (1, 2, 4) if b <= config.max_batch)
    cost = await worker.call(calibrate, engine, batches=batches, chunks=3, rounds=1)
    logger.info("cost model calibrated in %.1f s", time.monotonic() - started)
    budget = KvBudget(device_bytes=kv.slabs_total * kv.slab_bytes, host_bytes=kv.slabs_total * kv.slab_bytes,
                      per_session_bytes=engine.info.kv_bytes_per_session)
    policy = make_policy(config.policy, cost, DutyTracker(), kv=budget, max_batch=config.max_batch)
    return PolicyRuntime(policy, AdmissionMetrics(registry))
