"""The admission margin from the cost model's measured overrun (a quantile), the configured margin
its prior; the steps' time outside the engine; offload and restore measured online."""

from __future__ import annotations

import pytest

from engine.api import ItemResult, Phase, StepResult
from sessiond.admission import DutyTracker
from sessiond.admission.costmodel import MARGIN_PRIOR_STEPS
from sessiond.admission.policy import DutyPolicy
from sessiond.admission.runtime import AdmissionRuntime
from tests.sessiond.admission.factories import known_cost


def test_no_step_measured_the_margin_is_the_prior() -> None:
    cost = known_cost(1.0)
    assert cost.margin(0.15) == (0.15, "prior 0.15 (no step measured yet)")
    assert cost.margin(0.01)[0] == 0.05  # never below the floor
    assert cost.margin_snapshot(0.15)["steps"] == 0


def test_the_margin_is_the_p95_overrun_blended_with_the_prior_by_the_steps_measured() -> None:
    cost = known_cost(1.0)
    # 100 steps: 95 on time, 5 taking 1.25 x their prediction; p95 of the overruns (linear
    # between order statistics, 0-based position 94.05) = 0.0125: margin 0.0125 / 1.0125
    for i in range(100):
        cost.note_step_wall(0.1, 0.09, 0.125 if i % 20 == 0 else 0.1)
    q = 0.05 * 0.25
    measured = q / (1 + q)
    w = 100 / (100 + MARGIN_PRIOR_STEPS)
    value, source = cost.margin(0.15, 0.0)
    assert value == pytest.approx((1 - w) * 0.15 + w * measured, abs=1e-12)
    assert source.startswith("p95 of the last 100 steps' overrun over the prediction (+1.2%: margin 0.012)")
    assert cost.margin(0.15)[0] == pytest.approx(max(0.05, value))
    outside = None
    for i in range(100):  # the EWMA (alpha 0.2) of the wall seconds beyond the engine's 0.09
        sample = (0.125 if i % 20 == 0 else 0.1) - 0.09
        outside = sample if outside is None else outside + 0.2 * (sample - outside)
    assert cost.outside_s == pytest.approx(outside)


def test_a_slow_machine_raises_the_margin_and_the_budget_admission_plans_with() -> None:
    cost = known_cost(1.0)
    policy = DutyPolicy(cost, DutyTracker(), margin=0.15)
    assert policy.load_budget == 0.85
    for _ in range(450):
        cost.note_step_wall(0.1, 0.1, 0.15)  # every step 1.5 x its prediction: margin 1/3 measured
    w = 450 / (450 + MARGIN_PRIOR_STEPS)
    assert policy.margin == pytest.approx((1 - w) * 0.15 + w / 3)
    assert policy.load_budget == pytest.approx(1 - policy.margin)
    snap = policy.snapshot(0.0)
    assert snap["margin"] == policy.margin and snap["margin_from"]["steps"] == 450
    assert snap["margin_from"]["overrun_q"] == 0.5 and snap["margin_from"]["outside_s"] == pytest.approx(0.05)


def test_the_runtime_compares_the_prediction_before_the_step_corrected_it_with_the_steps_wall_time() -> None:
    cost = known_cost(1.0)  # denoise 1/8 s at batch 1, context 0
    runtime = AdmissionRuntime(DutyPolicy(cost, DutyTracker()), measured=DutyPolicy(cost, DutyTracker()))
    step = StepResult((ItemResult("a", Phase.DENOISE, 0),), {"denoise": 0.25}, {"denoise": 1})
    runtime.observe_step(step)  # the model moves toward 0.25 s (EWMA), after the prediction was kept
    runtime.observe_wall(0.3)
    snap = cost.margin_snapshot(0.15)
    assert (snap["steps"], snap["overrun_q"], snap["outside_s"]) == (1, round(0.3 / 0.125 - 1, 4), 0.05)
    runtime.observe_wall(0.3)  # no step waiting for its wall time: nothing counted
    assert cost.margin_snapshot(0.15)["steps"] == 1
    runtime.observe_op("offload", 0.4)
    assert cost.snapshot()["observed"] == {"denoise": 1, "offload": 1}
    assert cost.predict("offload") == 0.4  # no profile sample in this model: the online one
