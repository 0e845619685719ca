"""`AdmissionRuntime`: the admission policy the daemon runs with, and what it does each scheduler
tick. For a cost-model policy (`measured`): feed the duty tracker from the sessions' states,
publish the admission gauges, and answer which sessions are over their prior (the overrun
actions: the sessions apply them, `sessiond.session.overruns`); every measured engine step
corrects its cost model."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.api import StepResult
from sessiond.admission.decision import AdmissionPolicy, OverrunAction
from sessiond.admission.demand import DemandState, DemandSync
from sessiond.admission.metrics import AdmissionMetrics
from sessiond.admission.policy import PolicyBase

__all__ = ["AdmissionRuntime", "demand_states"]

logger = logging.getLogger(__name__)


def demand_states(sessions: Mapping[str, Any]) -> dict[str, DemandState]:
    """What each session demands now, as the duty tracker's feed reads it."""
    out = {}
    for sid, session in list(sessions.items()):
        segment = session.segment
        media = segment.frames_target / session.record.fps if segment is not None else None
        out[sid] = DemandState(active=session.state.label == "active", paused=bool(session.paused),
                               segment=segment.id if segment is not None else None, segment_media_s=media,
                               starts_stream=bool(segment is not None and segment.starts_stream))
    return out


@dataclass
class AdmissionRuntime:
    policy: AdmissionPolicy
    measured: PolicyBase | None = None  # the cost-model policy, when the policy is one
    metrics: AdmissionMetrics | None = None
    sync: DemandSync | None = field(init=False, default=None)
    _step: tuple[float, float] | None = field(init=False, default=None)  # (predicted, engine s) of the last step

    def __post_init__(self) -> None:
        if self.measured is not None:
            self.sync = DemandSync(self.measured.tracker)

    @property
    def scheduling(self) -> str:
        """The order the scheduler serves chunks in: the built policy's ("deadline" or "fifo");
        "deadline" for a policy handed in from outside (its owner drives it)."""
        return self.measured.scheduling if self.measured is not None else "deadline"

    def observe_step(self, result: StepResult) -> None:
        """A measured engine step corrects the cost model (EWMA per bucket); what the start-up
        profile predicted for it waits for the step's wall time (`observe_wall`)."""
        if self.measured is not None:
            cost = self.measured.cost
            predicted = cost.predict_step(result) if cost.calibrated() else None
            self._step = None if predicted is None else (predicted, sum(result.seconds.values()))
            cost.observe_step(result)

    def observe_op(self, item: str, seconds: float) -> None:
        """An offload or restore of one session's KV measured online: the cost model keeps it
        (its bucket moves by EWMA from the start-up profile's one sample)."""
        if self.measured is not None:
            self.measured.cost.observe(item, 1, 0, seconds)

    def observe_wall(self, wall_s: float) -> None:
        """The wall seconds of the step last observed, with everything around it (engine ops before
        it, the event loop, handing out its frames): the model's overrun, of which the margin is a
        quantile."""
        if self.measured is not None and self._step is not None:
            predicted, engine_s = self._step
            self.measured.cost.note_step_wall(predicted, engine_s, wall_s)
        self._step = None

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
