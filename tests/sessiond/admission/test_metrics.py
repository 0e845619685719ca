"""Admission and cost-model figures on a Prometheus registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from sessiond.admission import (
    AdmissionMetrics,
    AdmissionRequest,
    DutyPolicy,
    DutyPriors,
    DutyTracker,
    OverrunAction,
)
from tests.sessiond.admission.factories import known_cost


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_gauges_show_load_budget_cost_and_per_session_duty() -> None:
    registry = CollectorRegistry()
    metrics = AdmissionMetrics(registry)
    policy = DutyPolicy(known_cost(0.5), DutyTracker(DutyPriors(director=0.25)), margin=0.25, max_batch=1)
    policy.decide(AdmissionRequest("d1", "director", "create", 0.0))
    metrics.update(policy, 0.0)
    assert _value(registry, "sessiond_admission_predicted_load") == 0.125
    assert _value(registry, "sessiond_admission_load_budget") == 0.75
    assert _value(registry, "sessiond_session_duty", session="d1", mode="director") == 0.25
    assert _value(registry, "sessiond_costmodel_cost_rate", batch="1") == 0.5
    assert _value(registry, "sessiond_costmodel_predicted_seconds", item="decode", batch="1") == 0.125


def test_a_closed_session_leaves_the_duty_gauge() -> None:
    registry = CollectorRegistry()
    metrics = AdmissionMetrics(registry)
    policy = DutyPolicy(known_cost(0.5), DutyTracker(), max_batch=1)
    policy.decide(AdmissionRequest("d1", "director", "create", 0.0))
    metrics.update(policy, 0.0)
    policy.release("d1", 1.0)
    metrics.update(policy, 1.0)
    assert _value(registry, "sessiond_session_duty", session="d1", mode="director") is None


def test_overrun_actions_are_counted_by_name() -> None:
    registry = CollectorRegistry()
    metrics = AdmissionMetrics(registry)
    metrics.record_overruns([OverrunAction("a", "degrade_lead", 1.0, 0.3), OverrunAction("b", "offload_idle", 0.0, 0.3),
                             OverrunAction("c", "degrade_lead", 0.9, 0.3)])
    assert _value(registry, "sessiond_admission_overrun_actions_total", action="degrade_lead") == 2
    assert _value(registry, "sessiond_admission_overrun_actions_total", action="offload_idle") == 1
