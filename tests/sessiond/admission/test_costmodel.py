"""The cost model: calibration through the engine API, prediction, online correction."""

from __future__ import annotations

import json
import time

import pytest

from engine.api import FrameAction, ItemResult, Phase, StepPlan, StepResult
from sessiond.admission import CostModel, CostModelError, calibrate, context_bucket
from tests.sessiond.admission.factories import known_cost, model_info


class FakeEngine:
    """An engine whose phases take known seconds: (base + per_ctx x context) x (1 + 0.5 x (batch - 1))."""

    BASE = {"denoise": 0.010, "cache": 0.008, "decode": 0.020}

    def __init__(self, slots: int = 8) -> None:
        self.info = model_info()
        self.slots = slots
        self.chunk: dict[str, int] = {}
        self.pending: dict[str, list[Phase]] = {}
        self.closed: list[str] = []

    def open_session(self, session_id: str, *, seed: int, prompt: str) -> bool:
        if len(self.chunk) >= self.slots:
            return False
        self.chunk[session_id] = -1
        self.pending[session_id] = []
        return True

    def close_session(self, session_id: str) -> None:
        self.chunk.pop(session_id)
        self.closed.append(session_id)

    def reset(self, session_id: str, *, seed: int, prompt: str) -> None:
        self.chunk[session_id] = -1

    def begin_chunk(self, session_id: str, actions: list[FrameAction]) -> int:
        self.chunk[session_id] += 1
        self.pending[session_id] = [Phase.DENOISE] * self.info.denoise_steps + [Phase.CACHE, Phase.DECODE]
        return self.chunk[session_id]

    def next_phase(self, session_id: str) -> Phase | None:
        return self.pending[session_id][0] if self.pending[session_id] else None

    def seconds(self, phase: str, batch: int, context: int) -> float:
        return (self.BASE[phase] + 0.001 * context) * (1 + 0.5 * (batch - 1))

    def step(self, plan: StepPlan) -> StepResult:
        phase = plan.items[0].phase
        results = []
        for item in plan.items:
            self.pending[item.session_id].pop(0)
            results.append(ItemResult(item.session_id, phase, self.chunk[item.session_id]))
        context = max(r.chunk_index for r in results)
        return StepResult(tuple(results), {phase.value: self.seconds(phase.value, len(results), context)},
                          {phase.value: len(results)})

    def offload(self, session_id: str) -> None:
        return None

    def restore(self, session_id: str) -> bool:
        return True


def test_context_buckets_are_powers_of_two() -> None:
    assert [context_bucket(c) for c in (0, 1, 2, 3, 4, 7, 8, 100)] == [0, 1, 2, 2, 4, 4, 8, 64]


def test_calibration_measures_every_phase_at_each_batch_and_reports_progress() -> None:
    engine = FakeEngine()
    seen: list[tuple[int, int, str]] = []
    cost = calibrate(engine, batches=(1, 2, 4), chunks=3, rounds=1,
                     progress=lambda d, t, w: seen.append((d, t, w)))
    assert cost.calibrated()
    for batch in (1, 2, 4):
        for context in (0, 1, 2):
            for phase in ("denoise", "cache", "decode"):
                assert cost.predict(phase, batch, context) == pytest.approx(engine.seconds(phase, batch, context))
    assert [d for d, _, _ in seen] == list(range(1, 14))
    assert {t for _, t, _ in seen} == {13}
    assert seen[0][2] == "batch 1 warm-up"
    assert sorted(engine.closed) == ["calibrate-0", "calibrate-1", "calibrate-2", "calibrate-3"]


def test_calibration_refuses_clearly_when_the_pool_cannot_hold_the_profile() -> None:
    engine = FakeEngine(slots=2)
    with pytest.raises(CostModelError) as info:
        calibrate(engine, batches=(1, 4), chunks=1)
    assert info.value.code == "uncalibrated"
    assert "lower the largest calibration batch (4)" in str(info.value)
    assert engine.closed == ["calibrate-0", "calibrate-1"]


def test_a_bucket_keeps_the_lower_quartile_of_its_calibration_samples() -> None:
    cost = CostModel(model_info())
    for seconds in (0.500, 0.010, 0.012, 0.011, 0.490):  # two samples hit by a noisy neighbour
        cost.record("cache", 1, 0, seconds)
    assert cost.predict("cache") == 0.011


def test_a_chunk_costs_its_denoise_steps_plus_cache_plus_decode() -> None:
    cost = known_cost(0.8)
    assert cost.predict_chunk(1) == pytest.approx(4 * 0.1 + 0.2 + 0.2)
    assert cost.cost_rate(1) == pytest.approx(0.8)  # 1 media second per chunk


def test_the_plan_stretches_a_steady_step_to_the_load_budget() -> None:
    cost = known_cost(0.8, per_extra_session=0.5)  # a chunk: 0.8 s alone, 1.2 s for two together
    assert cost.planned_step_s(1, 0.8) == pytest.approx(1.0)
    assert cost.planned_step_s(2, 0.8) == pytest.approx(1.5)
    assert cost.planned_step_s(2, 0.6, profile=False) == pytest.approx(2.0)


def test_unmeasured_batches_are_interpolated_and_extrapolated() -> None:
    cost = CostModel(model_info())
    cost.record("decode", 1, 0, 1.0)
    cost.record("decode", 4, 0, 2.5)
    assert cost.predict("decode", 2) == pytest.approx(1.5)
    assert cost.predict("decode", 8) == pytest.approx(4.5)


def test_a_single_measured_batch_assumes_no_batching_gain() -> None:
    cost = CostModel(model_info())
    cost.record("decode", 1, 0, 0.2)
    assert cost.predict("decode", 3) == pytest.approx(0.6)


def test_an_unmeasured_context_takes_the_nearest_measured_bucket() -> None:
    cost = CostModel(model_info())
    cost.record("cache", 1, 0, 0.1)
    cost.record("cache", 1, 4, 0.3)
    assert cost.predict("cache", 1, 1) == pytest.approx(0.1)
    assert cost.predict("cache", 1, 16) == pytest.approx(0.3)


def test_online_measurements_move_a_bucket_by_ewma_and_track_the_error() -> None:
    cost = known_cost(0.8, clock=lambda: 100.0)  # decode at batch 1: 0.2 s; no time passes
    cost.observe("decode", 1, 0, 0.4)
    assert cost.predict("decode", 1) == pytest.approx(0.2 + 0.2 * 0.2)
    assert cost.error("decode") == pytest.approx(0.5)  # predicted 0.2 against 0.4
    for _ in range(60):
        cost.observe("decode", 1, 0, 0.4)
    assert cost.predict("decode", 1) == pytest.approx(0.4, rel=1e-4)
    assert cost.error("decode") == pytest.approx(0.0, abs=1e-4)


def test_settling_returns_every_profiled_bucket_to_its_profile_and_forgets_online_only_buckets() -> None:
    cost = known_cost(0.8)  # decode at batch 1: 0.2 s
    for seconds in (0.011, 0.010, 0.500):
        cost.record("cache", 2, 0, seconds)
    for _ in range(30):
        cost.observe("decode", 1, 0, 0.4)
        cost.observe("cache", 2, 0, 0.05)
    cost.observe("decode", 1, 8, 0.9)  # a bucket only the online corrections ever measured
    assert cost.settle() == 3
    assert (cost.predict("decode", 1), cost.predict("cache", 2)) == pytest.approx((0.2, 0.0105), abs=1e-15)
    assert cost.predict("decode", 1, 8) == 0.2  # forgotten: the nearest profiled bucket answers
    assert cost.snapshot()["cost_rate"]["1"] == 0.8
    assert cost.settle() == 0


def test_an_online_correction_fades_back_to_the_profile_once_not_measured() -> None:
    now = [0.0]
    cost = known_cost(0.8, clock=lambda: now[0])  # decode at batch 1: 0.2 s; half-life 30 s
    for _ in range(60):
        cost.observe("decode", 1, 0, 0.4)
    assert cost.predict("decode", 1) == pytest.approx(0.4, rel=1e-4)
    now[0] = 30.0
    assert cost.predict("decode", 1) == pytest.approx(0.3, rel=1e-4)
    now[0] = 90.0
    assert cost.predict("decode", 1) == pytest.approx(0.225, rel=1e-4)
    cost.observe("decode", 1, 0, 0.225)  # measured again: the EWMA starts from the faded value
    assert cost.predict("decode", 1) == pytest.approx(0.225, rel=1e-4)


def test_chunks_past_the_attention_window_are_filed_under_the_window() -> None:
    cost = known_cost(0.8, context_chunks=2, clock=lambda: 5.0)  # profiled at context 0 only
    cost.record("decode", 1, 2, 0.3)
    for index in (3, 4, 8, 16, 64):  # a long session's growing chunk index
        cost.observe("decode", 1, index, 0.5)
    contexts = sorted({(i["item"], i["context"]) for i in cost.snapshot()["items"]})
    assert contexts == [("cache", 0), ("decode", 0), ("decode", 2), ("denoise", 0)]
    assert cost.steady_context() == 2
    assert cost.predict("decode", 1, 500) == pytest.approx(0.3 + (0.5 - 0.3) * (1 - 0.8 ** 5))
    assert cost.settle() == 1
    assert cost.predict("decode", 1, 500) == 0.3


def test_the_profile_states_its_spread_at_the_steady_context() -> None:
    cost = CostModel(model_info(frames_per_chunk=16, fps=16, denoise_steps=1), context_chunks=1)
    for seconds in (0.1, 0.2, 0.3, 0.4, 0.5):
        for item in ("denoise", "cache", "decode"):
            cost.record(item, 1, 1, seconds)
    assert cost.spread(1) == pytest.approx((0.6, 1.2))  # 3 items at 0.2 and at 0.4, 1 media s a chunk
    assert cost.spread(2) is None
    assert cost.snapshot(max_batch=2)["profile_spread"] == {"1": [pytest.approx(0.6), pytest.approx(1.2)]}


def test_calibration_adds_steady_chunks_at_the_full_context_divided_by_the_batch() -> None:
    engine = FakeEngine()
    cost = calibrate(engine, batches=(1, 2, 4), chunks=3, rounds=1, context_chunks=2, steady_chunks=4)
    samples = {(i["item"], i["batch"], i["context"]): i["samples"] for i in cost.snapshot()["items"]}
    # contexts 0 and 1 once each; context 2 once plus 4 / b more chunks (chunk indices 3.. filed under 2)
    assert [samples[("decode", b, c)] for b in (1, 2, 4) for c in (0, 1, 2)] == [1, 1, 5, 1, 1, 3, 1, 1, 2]
    assert samples[("denoise", 1, 2)] == 5  # one sample a chunk: the mean of its denoise steps
    assert cost.steady_context() == 2


def test_engine_step_results_feed_the_model_per_phase() -> None:
    cost = known_cost(0.8)
    result = StepResult((ItemResult("a", Phase.DECODE, 5), ItemResult("b", Phase.DECODE, 2)),
                        {"decode": 0.5}, {"decode": 2})
    cost.observe_step(result)
    items = json.loads(json.dumps(cost.snapshot()))["items"]
    key = [i for i in items if i["item"] == "decode" and i["batch"] == 2]
    assert key == [{"item": "decode", "batch": 2, "context": 4, "seconds": 0.5, "samples": 1}]


def test_asking_before_calibration_is_a_coded_error() -> None:
    with pytest.raises(CostModelError) as info:
        CostModel(model_info()).predict("denoise")
    assert info.value.code == "uncalibrated"
    with pytest.raises(CostModelError) as info:
        known_cost(1.0).predict("warp")
    assert info.value.code == "invalid_sample"


def test_bad_samples_are_refused() -> None:
    with pytest.raises(CostModelError):
        CostModel(model_info()).observe("decode", 0, 0, 0.1)
    with pytest.raises(CostModelError):
        CostModel(model_info()).record("decode", 1, 0, float("nan"))


def test_the_snapshot_is_json_for_the_capacity_endpoint() -> None:
    snap = known_cost(0.8, per_extra_session=0.5).snapshot(max_batch=4)
    text = json.loads(json.dumps(snap))
    assert text["calibrated"] is True
    assert text["chunk_media_s"] == 1.0
    assert text["cost_rate"]["1"] == pytest.approx(0.8)
    assert text["cost_rate"]["2"] == pytest.approx(0.8 * 1.5 / 2)


class _WaitingEngine(FakeEngine):
    """Each step waits 20 ms for something else (a sleep: no CPU) and reports that wall time."""

    def step(self, plan: StepPlan) -> StepResult:
        result = super().step(plan)
        time.sleep(0.02)
        return StepResult(result.results, {p: 0.02 for p in result.seconds}, result.batch_sizes)


def test_a_cpu_time_profile_counts_what_the_thread_computed_not_what_it_waited_for() -> None:
    by_cpu = calibrate(_WaitingEngine(), batches=(1,), chunks=2, rounds=1, cpu_time=True)
    by_wall = calibrate(_WaitingEngine(), batches=(1,), chunks=2, rounds=1)
    assert (by_cpu.profile_clock, by_wall.profile_clock) == ("cpu", "wall")
    assert by_wall.predict("decode", 1, 1) == 0.02
    assert by_cpu.predict("decode", 1, 1) < 0.002  # a sleeping thread computes nothing
    assert by_cpu.contention is not None and by_cpu.contention > 10  # waited 10x longer than it ran
    assert by_cpu.snapshot()["profile_clock"] == "cpu"


class _GuidedFirstStep(FakeEngine):
    """The first denoise step of each chunk costs twice the others (a guided step)."""

    def step(self, plan: StepPlan) -> StepResult:
        first = plan.items[0].phase is Phase.DENOISE and len(self.pending[plan.items[0].session_id]) == (
            self.info.denoise_steps + 2)
        result = super().step(plan)
        if first:
            return StepResult(result.results, {"denoise": 2 * result.seconds["denoise"]}, result.batch_sizes)
        return result


def test_a_chunk_whose_steps_differ_is_planned_at_its_whole_cost() -> None:
    engine = _GuidedFirstStep()
    cost = calibrate(engine, batches=(1,), chunks=3, rounds=1, context_chunks=2)
    steps = engine.info.denoise_steps  # 4: one at 2x, three at 1x
    whole = (steps + 1) * engine.seconds("denoise", 1, 2) + engine.seconds("cache", 1, 2) + engine.seconds(
        "decode", 1, 2)
    assert cost.predict_chunk(1, 2) == pytest.approx(whole)


def test_calibration_ends_after_the_batch_size_that_is_enough_and_still_measures_offload() -> None:
    engine = FakeEngine()
    asked: list[int] = []
    seen: list[tuple[int, int, str]] = []

    def enough(batch: int, model: CostModel) -> bool:
        asked.append(batch)
        return model.predict("decode", 1, 0) > 0  # what batch 1 measured decides it

    cost = calibrate(engine, batches=(1, 2, 4), chunks=3, rounds=1, enough=enough,
                     progress=lambda d, t, w: seen.append((d, t, w)))
    assert asked == [1] and cost.profiled_batches() == [1]
    assert [w for _, _, w in seen] == ["batch 1 warm-up", "batch 1 round 0 chunk 0", "batch 1 round 0 chunk 1",
                                       "batch 1 round 0 chunk 2", "offload and restore"]
    assert (seen[-1][0], seen[-1][1]) == (13, 13)  # the progress still ends at its total
    assert cost.calibrated()
    assert cost.predict("decode", 4, 0) == pytest.approx(4 * engine.seconds("decode", 1, 0))  # no gain assumed
