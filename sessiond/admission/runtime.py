"""`AdmissionRuntime`: the admission policy the daemon runs with, and what it does each scheduler
tick. For a cost-model policy (`measured`): feed the duty tracker from the sessions' states,
publish the admission gauges, and apply the overrun answer to the sessions (a world session over
its prior keeps one chunk of lead until admission no longer names it; idle sessions are
offloaded); every measured engine step corrects its cost model."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.api import StepResult
from sessiond.admission.decision import AdmissionPolicy, OverrunAction
from sessiond.admission.demand import DemandState, DemandSync
from sessiond.admission.metrics import AdmissionMetrics
from sessiond.admission.policy import PolicyBase
from sessiond.lifecycle import SessionState
from sessiond.logs import log_event
from sessiond.session.jobs import EngineOp, Op

__all__ = ["AdmissionRuntime", "apply_overruns", "demand_states"]

logger = logging.getLogger(__name__)


def demand_states(sessions: Mapping[str, Any]) -> dict[str, DemandState]:
    """What each session demands now, as the duty tracker's feed reads it."""
    out = {}
    for sid, session in list(sessions.items()):
        segment = session.segment
        media = segment.frames_target / session.record.fps if segment is not None else None
        out[sid] = DemandState(active=session.state.label == "active", paused=bool(session.paused),
                               segment=segment.id if segment is not None else None, segment_media_s=media)
    return out


def apply_overruns(sessions: Mapping[str, Any], actions: Iterable[OverrunAction]) -> None:
    """degrade_lead: the world session keeps one chunk of lead (until admission no longer names
    it); offload_idle: an idle session's KV goes to host memory now."""
    actions = list(actions)
    degraded = {a.session_id for a in actions if a.action == "degrade_lead"}
    for sid, live in sessions.items():
        if live.lead_override is not None and sid not in degraded:
            live.lead_override = None
            log_event("lead_restored", sid)
    for action in actions:
        session = sessions.get(action.session_id)
        if session is None or session.state.terminal:
            continue
        if action.action == "degrade_lead":
            if session.lead_override is None:
                log_event("lead_degraded", session.id, duty=round(action.duty, 3), prior=action.prior)
            session.lead_override = 1.0
        elif action.action == "offload_idle" and session.state == SessionState.IDLE and session.job is None:
            session.ops.append(EngineOp(Op.OFFLOAD))
            session.set_state(SessionState.OFFLOADED, reason="overrun")


@dataclass
class AdmissionRuntime:
    policy: AdmissionPolicy
    measured: PolicyBase | None = None  # the cost-model policy, when the policy is one
    metrics: AdmissionMetrics | None = None
    sync: DemandSync | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.measured is not None:
            self.sync = DemandSync(self.measured.tracker)

    @property
    def scheduling(self) -> str:
        """The order the scheduler serves chunks in: the built policy's ("deadline" or "fifo");
        "deadline" for a policy handed in from outside (its owner drives it)."""
        return self.measured.scheduling if self.measured is not None else "deadline"

    def observe_step(self, result: StepResult) -> None:
        """A measured engine step corrects the cost model (EWMA per bucket)."""
        if self.measured is not None:
            self.measured.cost.observe_step(result)

    def refresh(self, sessions: Mapping[str, Any]) -> list[OverrunAction]:
        """Each tick: the sessions' states into the duty tracker, the gauges updated; returns the
        overrun actions to apply now (counted in the metrics)."""
        if self.measured is None or self.sync is None:
            return []
        now = time.monotonic()
        self.sync.update(demand_states(sessions), now)
        self.update_gauges(now)
        actions = self.measured.overruns(now)
        if self.metrics is not None:
            self.metrics.record_overruns(actions)
        return actions

    def tick(self, sessions: Mapping[str, Any]) -> None:
        """Twice a second: admission's gauges, and its answer to sessions over their prior."""
        if self.measured is not None:
            apply_overruns(sessions, self.refresh(sessions))

    def update_gauges(self, now: float) -> None:
        if self.measured is not None and self.metrics is not None:
            self.metrics.update(self.measured, now)

    def duty_of(self, session_id: str) -> dict[str, Any] | None:
        """The session's duty figures (for its status), None when admission does not track it."""
        if self.measured is None:
            return None
        tracker = self.measured.tracker
        if session_id not in tracker:
            return None
        now = time.monotonic()
        return {"duty": round(tracker.duty(session_id, now), 4), "prior": tracker.prior(session_id),
                "measured": tracker.measured(session_id, now), "demanding": tracker.demanding(session_id, now)}
