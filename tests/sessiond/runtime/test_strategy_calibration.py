"""Admission's start-up profile with a decoder placed apart: its decode steps also run the chunk's
cache pass (engine.placement), and the profile still measures every phase of a chunk."""

from __future__ import annotations

from engine.api import FrameAction, StepItem, StepPlan
from engine.placement import DecoderPlacement
from sessiond.admission.calibrate import calibrate
from tests.engine._helpers import make_engine


def test_the_profile_of_a_placed_decoder_measures_every_phase_of_a_chunk() -> None:
    engine = make_engine(decoder_placement=DecoderPlacement("device", "cpu:1", threads=1))
    engine.warmup()
    model = calibrate(engine, batches=(1, 2), chunks=2, rounds=1)
    assert model.calibrated()
    for item in ("denoise", "cache", "decode"):
        assert model.predict(item, 1, 0) > 0
        assert model.predict(item, 2, 1) > 0


def test_a_fused_steps_phase_seconds_add_up_to_no_more_than_its_wall_time() -> None:
    import time

    engine = make_engine(decoder_placement=DecoderPlacement("device", "cpu:1", threads=1))
    assert engine.open_session("s", seed=0, prompt="x")
    engine.begin_chunk("s", [FrameAction()])
    while (phase := engine.next_phase("s")) is not None:
        began = time.perf_counter()
        result = engine.step(StepPlan((StepItem("s", phase),)))
        wall = time.perf_counter() - began
        assert sum(result.seconds.values()) <= wall
    assert sorted(result.seconds) == ["cache", "decode"] and result.batch_sizes == {"cache": 1, "decode": 1}
