"""The admission margin from the cost model's measured overrun (a quantile), the configured margin
its prior; the steps' time outside the engine; offload and restore measured online."""

from __future__ import annotations

import pytest

from engine.api import ItemResult, Phase, StepResult
from sessiond.admission import DutyTracker
from sessiond.admission.costmodel import MARGIN_HALF_LIFE_S, MARGIN_HOLD_S, MARGIN_PRIOR_SAMPLES
from sessiond.admission.policy import DutyPolicy
from sessiond.admission.runtime import AdmissionRuntime
from tests.sessiond.admission.factories import known_cost


def test_no_step_measured_the_margin_is_the_prior() -> None:
    cost = known_cost(1.0)
    assert cost.margin(0.15) == (0.15, "prior 0.15 (no step measured yet)")
    assert cost.margin(0.01)[0] == 0.05  # never below the floor
    assert cost.margin_snapshot(0.15)["samples"] == 0


def test_the_margin_is_the_p95_overrun_of_a_chunks_worth_of_steps_blended_with_the_prior() -> None:
    cost = known_cost(1.0)  # a chunk at batch 1: 1 s, so four steps of 0.25 s make one sample
    for i in range(200):
        cost.note_step_wall(0.25, 0.2, 0.35 if i % 40 == 0 else 0.25)
    # 50 samples: 45 on time, 5 with one step 0.1 s over (0.1 over a chunk's 1.0 s); p95
    # (0-based position 46.55 of the sorted 50) = 0.1: margin 0.1 / 1.1, weighted 50 / (50 + 50)
    value, source = cost.margin(0.15, 0.0)
    assert value == pytest.approx(0.5 * 0.15 + 0.5 * 0.1 / 1.1, abs=1e-12)
    assert source.startswith("p95 of the last 50 chunks' worth of steps' overrun over the prediction (+10.0%: "
                             "margin 0.091), weighted 0.50 against the prior 0.15")
    outside = None
    for i in range(200):  # the EWMA (alpha 0.2) of the wall seconds beyond the engine's 0.2
        sample = (0.35 if i % 40 == 0 else 0.25) - 0.2
        outside = sample if outside is None else outside + 0.2 * (sample - outside)
    assert cost.outside_s == pytest.approx(outside)
    assert cost.margin_snapshot(0.15)["steps_total"] == 200


def test_one_slow_step_in_a_chunk_is_not_a_slow_chunk() -> None:
    cost = known_cost(1.0)
    for i in range(400):  # one step in four twice as slow: every chunk 25% over, never 100%
        cost.note_step_wall(0.25, 0.25, 0.5 if i % 4 == 0 else 0.25)
    assert cost.margin_snapshot(0.15)["overrun_q"] == 0.25


def test_a_slow_machine_raises_the_margin_and_the_budget_admission_plans_with() -> None:
    cost = known_cost(1.0)
    policy = DutyPolicy(cost, DutyTracker(), margin=0.15)
    assert policy.load_budget == 0.85
    for _ in range(450):
        cost.note_step_wall(0.25, 0.25, 0.375)  # every step 1.5 x its prediction: margin 1/3 measured
    w = 112 / (112 + MARGIN_PRIOR_SAMPLES)  # 450 steps make 112 chunks' worth
    assert policy.margin == pytest.approx((1 - w) * 0.15 + w / 3)
    assert policy.load_budget == pytest.approx(1 - policy.margin)
    snap = policy.snapshot(0.0)
    assert snap["margin"] == policy.margin and snap["margin_from"]["samples"] == 112
    assert snap["margin_from"]["overrun_q"] == 0.5 and snap["margin_from"]["outside_s"] == pytest.approx(0.125)


def test_the_runtime_takes_the_profiles_prediction_of_the_step_and_its_wall_time() -> None:
    cost = known_cost(1.0)  # denoise 1/8 s at batch 1, context 0
    runtime = AdmissionRuntime(DutyPolicy(cost, DutyTracker()), measured=DutyPolicy(cost, DutyTracker()))
    step = StepResult((ItemResult("a", Phase.DENOISE, 0),), {"denoise": 0.25}, {"denoise": 1})
    runtime.observe_step(step)  # the model moves toward 0.25 s (EWMA) after the prediction was kept
    runtime.observe_wall(0.3)
    snap = cost.margin_snapshot(0.15)
    assert (snap["steps_total"], snap["samples"], snap["outside_s"]) == (1, 0, 0.05)  # 1/8 of a chunk so far
    # the overrun is over the start-up profile (what admission plans with once settled), which
    # the online correction does not move
    assert cost.predict("denoise") == pytest.approx(0.125 + 0.2 * (0.25 - 0.125))
    assert cost.predict("denoise", profile=True) == 0.125
    assert cost.predict_step(step) == 0.125
    runtime.observe_wall(0.3)  # no step waiting for its wall time: nothing counted
    assert cost.margin_snapshot(0.15)["steps_total"] == 1
    runtime.observe_op("offload", 0.4)
    assert cost.snapshot()["observed"] == {"denoise": 1, "offload": 1}
    assert cost.predict("offload") == 0.4  # no profile sample in this model: the online one


def test_a_slow_spell_fades_from_the_margin_once_nothing_is_measured_so_admission_comes_back() -> None:
    now = [0.0]
    cost = known_cost(1.0, clock=lambda: now[0])
    policy = DutyPolicy(cost, DutyTracker(), margin=0.15)
    for _ in range(450):
        cost.note_step_wall(0.25, 0.25, 0.375)  # a slow spell: every chunk 1.5 x its profile
    w = 112 / (112 + MARGIN_PRIOR_SAMPLES)
    slow = (1 - w) * 0.15 + w / 3
    assert policy.margin == pytest.approx(slow)
    now[0] = MARGIN_HOLD_S  # the sessions closed: for a while the spell counts in full
    assert policy.margin == pytest.approx(slow)
    now[0] = MARGIN_HOLD_S + MARGIN_HALF_LIFE_S  # then its weight halves every half-life
    assert policy.margin == pytest.approx((1 - w / 2) * 0.15 + w / 2 / 3)
    assert "(faded x0.50: no step measured for 90 s)" in cost.margin(0.15)[1]
    now[0] = MARGIN_HOLD_S + 10 * MARGIN_HALF_LIFE_S  # ten minutes idle: back at the configured prior
    assert policy.margin == pytest.approx(0.15, abs=1e-3)
    cost.note_step_wall(1.0, 1.0, 1.5)  # measured again: the spell and the new chunk count in full
    assert policy.margin == pytest.approx((1 - 113 / 163) * 0.15 + 113 / 163 / 3)
