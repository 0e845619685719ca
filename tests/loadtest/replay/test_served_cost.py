"""The calibration a served daemon published, rebuilt on the client's side of the wire."""

from __future__ import annotations

import pytest

from engine.api import ActionSpace, ModelInfo
from loadtest.replay.served_cost import cost_model_of
from sessiond.admission.costmodel import CostModel

INFO = ModelInfo(name="demo", width=256, height=256, fps=16, frames_per_chunk=4, latent_frames_per_chunk=1,
                 denoise_steps=3, action_space=ActionSpace(keys=("w",)), kv_bytes_per_session=1 << 20,
                 device="cpu", dtype="bfloat16")


def _served() -> tuple[CostModel, dict[str, object]]:
    cost = CostModel(INFO)
    for item, base in (("denoise", 0.030), ("cache", 0.012), ("decode", 0.008)):
        for batch in (1, 2):
            for context in (0, 1, 2):
                cost.record(item, batch, context, base * batch * (1 + 0.1 * context))
    capacity = {"engine": {"width": 256, "height": 256, "fps": 16, "frames_per_chunk": 4,
                           "kv_bytes_per_session": 1 << 20, "device": "cpu", "dtype": "bfloat16"},
                "admission": {"policy": "duty", "cost_model": cost.snapshot(2)}}
    return cost, capacity


def test_the_rebuilt_model_predicts_what_the_daemon_predicts() -> None:
    cost, capacity = _served()
    rebuilt = cost_model_of(capacity)
    for batch in (1, 2, 3):
        for context in (0, 1, 2, 7):
            assert rebuilt.predict_chunk(batch, context) == pytest.approx(cost.predict_chunk(batch, context))
    assert rebuilt.cost_rate(1) == pytest.approx(cost.cost_rate(1))
    assert rebuilt.chunk_media_s == 0.25


def test_a_daemon_without_a_cost_model_is_named() -> None:
    _, capacity = _served()
    with pytest.raises(ValueError, match="no calibrated cost model \\(policy 'kv'\\)"):
        cost_model_of({**capacity, "admission": {"policy": "kv"}})
