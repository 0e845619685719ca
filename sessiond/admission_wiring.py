"""Wiring `--policy duty|one-per-gpu|fifo` (sessiond.admission) into the daemon: calibrate the
cost model on the engine thread at start-up (through the model's whole attention context, within
a time budget), feed it measured steps, feed the duty tracker from the sessions' states each
scheduler tick, publish its metrics, and hand back its overrun decisions."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.api import EngineProtocol, KVStats
from sessiond.admission import AdmissionMetrics, PolicyBase
from sessiond.admission.decision import OverrunAction
from sessiond.admission.demand import DemandState, DemandSync
from sessiond.admission.setup import build_policy as build_admission_policy
from sessiond.config import ServeConfig
from sessiond.engine_worker import EngineWorker

__all__ = ["PolicyRuntime", "build_policy", "calibration_chunks", "demand_states"]

logger = logging.getLogger(__name__)

_DEFAULT_CONTEXT_CHUNKS = 3  # an engine that does not say how long its attention context is


def demand_states(sessions: Mapping[str, Any]) -> dict[str, DemandState]:
    """What each session demands now, as the duty tracker's feed reads it."""
    out = {}
    for sid, session in list(sessions.items()):
        segment = session.segment
        media = segment.frames_target / session.record.fps if segment is not None else None
        out[sid] = DemandState(active=session.state.label == "active", paused=bool(session.paused),
                               segment=segment.id if segment is not None else None, segment_media_s=media)
    return out


def calibration_chunks(engine: Any) -> int:
    """Sink + window chunks of the model (steady cost is only reached once the context is full)."""
    config = getattr(engine, "config", None)
    sink, window = getattr(config, "sink_chunks", None), getattr(config, "window_chunks", None)
    if isinstance(sink, int) and isinstance(window, int) and sink + window > 0:
        return sink + window
    return _DEFAULT_CONTEXT_CHUNKS


@dataclass
class PolicyRuntime:
    policy: PolicyBase
    metrics: AdmissionMetrics
    sync: DemandSync = field(init=False)

    def __post_init__(self) -> None:
        self.sync = DemandSync(self.policy.tracker)

    def refresh(self, sessions: Mapping[str, Any]) -> list[OverrunAction]:
        """Each tick: the sessions' states into the duty tracker, the gauges updated; returns the
        overrun actions to apply now (counted in the metrics)."""
        now = time.monotonic()
        self.sync.update(demand_states(sessions), now)
        self.metrics.update(self.policy, now)
        actions = self.policy.overruns(now)
        self.metrics.record_overruns(actions)
        return actions

    def duty_of(self, session_id: str) -> dict[str, Any] | None:
        """The session's duty figures (for its status), None when admission does not track it."""
        tracker = self.policy.tracker
        if session_id not in tracker:
            return None
        now = time.monotonic()
        return {"duty": round(tracker.duty(session_id, now), 4), "prior": tracker.prior(session_id),
                "measured": tracker.measured(session_id, now), "demanding": tracker.demanding(session_id, now)}


async def build_policy(config: ServeConfig, engine: EngineProtocol, worker: EngineWorker, registry: Any,
                       kv: KVStats) -> PolicyRuntime:
    """Calibrate (a profile on the engine thread through sink + window chunks, bounded by
    `calibration_budget_s`, logged as progress) and build the policy."""
    started = time.monotonic()
    chunks = calibration_chunks(engine)
    policy = await worker.call(build_admission_policy, config.policy, engine, kv, max_batch=config.max_batch,
                               chunks=chunks, rounds=1, time_budget_s=config.calibration_budget_s)
    logger.info("cost model calibrated through %d chunks in %.1f s", chunks, time.monotonic() - started)
    return PolicyRuntime(policy, AdmissionMetrics(registry))
