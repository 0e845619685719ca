"""`sessiond serve --pace-profile`: the tiny engine does the work, each step then lasts what a
measured profile says, scaled to the tiny model's media per chunk. A fake clock makes every wait exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.api import FrameAction, StepItem, StepPlan
from sessiond.config import ServeConfig
from sessiond.errors import ServeConfigError
from sessiond.runtime.paced_engine import PacedEngine, PaceProfile, PaceProfileError
from tests.engine._helpers import make_engine

# a profile as replay-compare writes it: 0.75 s of media per chunk, two contexts, batches 1 and 2
CALIBRATION = {"model": "gpu-model", "chunk_media_s": 0.75, "items": [
    {"item": "denoise", "batch": 1, "context": 0, "seconds": 0.050},
    {"item": "denoise", "batch": 1, "context": 2, "seconds": 0.060},
    {"item": "denoise", "batch": 2, "context": 2, "seconds": 0.110},
    {"item": "cache", "batch": 1, "context": 0, "seconds": 0.040},
    {"item": "cache", "batch": 1, "context": 2, "seconds": 0.045},
    {"item": "decode", "batch": 1, "context": 0, "seconds": 0.015},
    {"item": "offload", "batch": 1, "context": 0, "seconds": 0.300},
]}


class FakeClock:
    """Time moves only when the paced engine sleeps, or by `work` per reading after a step began."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 9))
        self.now += seconds


def _paced(scale: float = 1.0) -> tuple[PacedEngine, FakeClock]:
    clock = FakeClock()
    return PacedEngine(make_engine(), PaceProfile.from_json(CALIBRATION, "test"), scale, clock, clock.sleep), clock


def _chunk(engine: PacedEngine, sid: str) -> list[str]:
    engine.begin_chunk(sid, [FrameAction(keys=("w",))])
    phases = []
    while (phase := engine.next_phase(sid)) is not None:
        engine.step(StepPlan((StepItem(sid, phase),)))
        phases.append(phase.value)
    return phases


def test_a_profile_reads_from_a_replay_compare_json_or_its_calibration(tmp_path: Path) -> None:
    path = tmp_path / "compare.json"
    path.write_text(json.dumps({"daemons": {"duty": {"calibration": CALIBRATION}}}))
    profile = PaceProfile.load(path)
    assert (profile.model, profile.chunk_media_s, profile.seconds[("cache", 1, 2)]) == ("gpu-model", 0.75, 0.045)
    assert PaceProfile.from_json(CALIBRATION, "x").seconds == profile.seconds


def test_the_profiled_seconds_take_the_deepest_context_and_scale_a_batch_beyond_the_profile() -> None:
    profile = PaceProfile.from_json(CALIBRATION, "test")
    assert profile.step_seconds("denoise", 1, 0) == 0.050
    assert profile.step_seconds("denoise", 1, 1) == 0.050  # context 1 not profiled: the deepest below it
    assert profile.step_seconds("denoise", 2, 5) == 0.110
    assert profile.step_seconds("denoise", 4, 2) == pytest.approx(0.220)  # 2 profiled: 4 costs twice that
    assert profile.step_seconds("cache", 2, 2) == pytest.approx(0.090)
    assert profile.step_seconds("restore", 1, 0) is None


def test_each_step_lasts_what_the_profile_says_for_its_phase_and_context() -> None:
    engine, clock = _paced()
    engine.open_session("s", seed=1, prompt="a hill")
    phases = _chunk(engine, "s")
    assert phases.count("denoise") == 4 and "cache" in phases and "decode" in phases
    # the fake clock only moves by sleeping, so each sleep is the whole profiled step: chunk 0 has no context
    expected = {"denoise": 0.050, "cache": 0.040, "decode": 0.015}
    assert clock.slept == [expected[p] for p in phases]
    for _ in range(2):
        _chunk(engine, "s")
    clock.slept.clear()
    phases = _chunk(engine, "s")  # the fourth chunk reads 2 context chunks (sink + window)
    deep = {"denoise": 0.060, "cache": 0.045, "decode": 0.015}
    assert clock.slept == [deep[p] for p in phases]


def test_a_batch_is_paced_as_one_step_and_the_media_scale_applies() -> None:
    engine, clock = _paced(scale=0.5)
    for sid in ("a", "b"):
        engine.open_session(sid, seed=1, prompt="a hill")
        _chunk(engine, sid)
        engine.begin_chunk(sid, [FrameAction()])
    clock.slept.clear()
    first = [StepItem(sid, engine.next_phase(sid)) for sid in ("a", "b")]  # type: ignore[arg-type]
    result = engine.step(StepPlan(tuple(first)))
    assert result.seconds == {"denoise": pytest.approx(0.5 * 0.100)}  # what the profile and scheduler read
    # both at context 1 (one chunk before the one in progress): the deepest profiled context below it
    # is 0, where only batch 1 was measured (0.050): batch 2 costs 0.100, times the media scale
    assert [item.phase.value for item in first] == ["denoise", "denoise"]
    assert clock.slept == [pytest.approx(0.5 * 0.100)]


def test_offload_takes_the_profiled_seconds_and_a_slower_machine_sets_its_own_pace() -> None:
    engine, clock = _paced(scale=0.5)
    engine.open_session("s", seed=1, prompt="a hill")
    _chunk(engine, "s")
    clock.slept.clear()
    engine.offload("s")
    assert clock.slept == [0.300]  # KV moves at the profiled model's size: not scaled
    clock.slept.clear()
    slow = PacedEngine(engine.inner, PaceProfile.from_json(CALIBRATION, "test"), 1.0, lambda: clock.now,
                       clock.sleep)
    real_step = slow.inner.step

    def long_step(plan: StepPlan):  # type: ignore[no-untyped-def]
        clock.now += 1.0  # the model itself takes 1 s: longer than any profiled step
        return real_step(plan)

    slow.inner.step = long_step
    slow.restore("s")
    _chunk(slow, "s")
    assert clock.slept == []


def test_a_scaled_profile_scales_compute_but_not_the_moves_of_kv() -> None:
    profile = PaceProfile.from_json(CALIBRATION, "h100.json").scaled(0.62)
    assert profile.source == "h100.json x0.62"
    assert profile.step_seconds("denoise", 2, 2) == pytest.approx(0.62 * 0.110)
    assert profile.step_seconds("cache", 1, 2) == pytest.approx(0.62 * 0.045)
    assert profile.step_seconds("decode", 1, 0) == pytest.approx(0.62 * 0.015)
    assert profile.step_seconds("offload", 1, 0) == 0.300
    clock = FakeClock()
    engine = PacedEngine(make_engine(), profile, 1.0, clock, clock.sleep)
    engine.open_session("s", seed=1, prompt="a hill")
    phases = _chunk(engine, "s")
    expected = {"denoise": 0.62 * 0.050, "cache": 0.62 * 0.040, "decode": 0.62 * 0.015}
    assert clock.slept == [pytest.approx(expected[p]) for p in phases]
    with pytest.raises(PaceProfileError, match="positive factor"):
        profile.scaled(0.0)


def test_serve_takes_a_pace_scale_only_as_a_positive_factor_of_a_profile(tmp_path: Path) -> None:
    good = tmp_path / "profile.json"
    good.write_text(json.dumps(CALIBRATION))
    assert ServeConfig(model="tiny", pace_profile=str(good), pace_scale=0.5).pace_scale == 0.5
    with pytest.raises(ServeConfigError, match="give --pace-profile FILE too"):
        ServeConfig(model="tiny", pace_scale=0.5)
    for bad in (0, -1.0, True, "0.5"):
        with pytest.raises(ServeConfigError, match="pace_scale"):
            ServeConfig(model="tiny", pace_profile=str(good), pace_scale=bad)  # type: ignore[arg-type]


def test_serve_refuses_a_profile_it_cannot_read_before_anything_starts(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"items": [{"item": "denoise"}]}))
    with pytest.raises(ServeConfigError, match="pace_profile") as caught:
        ServeConfig(model="tiny", pace_profile=str(bad))
    assert "an item lacks item/batch/context/seconds" in str(caught.value)
    with pytest.raises(ServeConfigError, match="cannot read it as JSON"):
        ServeConfig(model="tiny", pace_profile=str(tmp_path / "missing.json"))
    with pytest.raises(PaceProfileError, match="no daemon in it has a calibration"):
        PaceProfile.from_json({"daemons": {"duty": {"calibration": None}}}, "x")
