"""The cost model against the real tiny engine on CPU: calibrated at start, corrected online from
the engine's measured steps, its prediction of each next chunk (denoise steps + cache + decode)
tracks the measured chunk time. Stated error: the median over 12 chunks of max(predicted /
measured, measured / predicted) is at most 1.5 at batch 1 and at batch 2. Torch runs one thread
here: on this shared 2-core machine, two intra-op threads make single steps jitter by 10x."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

import pytest
import torch

from engine.api import FrameAction, StepItem, StepPlan
from engine.engine import Engine
from sessiond.admission import calibrate

RATIO_BOUND = 1.5


@pytest.fixture
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("batch", [1, 2])
def test_predictions_track_measured_chunk_times_on_cpu(one_thread: None, batch: int) -> None:
    engine = Engine.create(model="tiny", device="cpu")
    engine.warmup()
    cost = calibrate(engine, batches=(1, 2), chunks=3)
    sids = [f"m{i}" for i in range(batch)]
    for i, sid in enumerate(sids):
        assert engine.open_session(sid, seed=i, prompt="measure")
    ratios = []
    for _ in range(12):
        index = 0
        for sid in sids:
            index = engine.begin_chunk(sid, [FrameAction()])
        predicted, measured = cost.predict_chunk(batch, index), 0.0
        phase = engine.next_phase(sids[0])
        while phase is not None:
            result = engine.step(StepPlan(tuple(StepItem(sid, phase) for sid in sids)))
            measured += sum(result.seconds.values())
            cost.observe_step(result)
            phase = engine.next_phase(sids[0])
        ratios.append(max(predicted / measured, measured / predicted))
    assert statistics.median(ratios) <= RATIO_BOUND, f"ratios {[round(r, 2) for r in ratios]}"
    assert cost.snapshot()["observed"] == {"denoise": 48, "cache": 12, "decode": 12}
