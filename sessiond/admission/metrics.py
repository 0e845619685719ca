"""Admission and cost-model figures on the daemon's Prometheus registry (names `sessiond_`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from sessiond.admission.costmodel import CHUNK_ITEMS
from sessiond.admission.decision import OverrunAction
from sessiond.admission.errors import CostModelError
from sessiond.admission.policy import PolicyBase

__all__ = ["AdmissionMetrics"]


class AdmissionMetrics:
    """Registered on a given registry; ``update`` refreshes the gauges from a policy."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.load = Gauge("sessiond_admission_predicted_load", "Sum of duty x cost rate (GPU s per s)", registry=r)
        self.budget = Gauge("sessiond_admission_load_budget", "1 - margin: the admission bound on load", registry=r)
        self.duty = Gauge("sessiond_session_duty", "Duty cycle per session (window blend with prior)",
                          ["session", "mode"], registry=r)
        self.cost_rate = Gauge("sessiond_costmodel_cost_rate", "GPU seconds per media second per session",
                               ["batch"], registry=r)
        self.predicted = Gauge("sessiond_costmodel_predicted_seconds", "Predicted seconds per item, steady context",
                               ["item", "batch"], registry=r)
        self.error = Gauge("sessiond_costmodel_relative_error", "EWMA of |predicted - measured| / measured",
                           ["item"], registry=r)
        self.overruns = Counter("sessiond_admission_overrun_actions", "Actions applied to sessions over their prior",
                                ["action"], registry=r)
        self._sessions: set[tuple[str, str]] = set()

    def record_overruns(self, actions: list[OverrunAction]) -> None:
        for a in actions:
            self.overruns.labels(action=a.action).inc()

    def update(self, policy: PolicyBase, now: float) -> None:
        load, _ = policy.load(now)
        self.load.set(load)
        self.budget.set(policy.load_budget)
        current = {(sid, policy.tracker.mode(sid)) for sid in policy.tracker.sessions()}
        for sid, mode in self._sessions - current:
            self.duty.remove(sid, mode)
        for sid, mode in current:
            self.duty.labels(session=sid, mode=mode).set(policy.tracker.duty(sid, now))
        self._sessions = current
        cost = policy.cost
        if not cost.calibrated():
            return
        ctx = cost.steady_context()
        for b in range(1, policy.max_batch + 1):
            self.cost_rate.labels(batch=str(b)).set(cost.cost_rate(b))
            for item in CHUNK_ITEMS:
                self.predicted.labels(item=item, batch=str(b)).set(cost.predict(item, b, ctx))
        for item in (*CHUNK_ITEMS, "offload", "restore"):
            err = cost.error(item)
            if err is not None:
                self.error.labels(item=item).set(err)
            try:
                self.predicted.labels(item=item, batch="1").set(cost.predict(item, 1, ctx))
            except CostModelError:
                continue
