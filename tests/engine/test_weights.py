"""Checkpoints load strictly: every problem is named; a T2V checkpoint ignores actions exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from engine.api import FrameAction
from engine.errors import ConfigError, WeightsError
from tests.engine._helpers import W, make_engine, run_chunk


def _save(state: dict[str, torch.Tensor], path: Path) -> Path:
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    return path


def _dit_state(seed: int = 0) -> dict[str, torch.Tensor]:
    return dict(make_engine(init_seed=seed).parts.model.state_dict())


def test_a_saved_checkpoint_reproduces_the_model_it_came_from(tmp_path: Path) -> None:
    source = make_engine(init_seed=42)
    loaded = make_engine(weights=_save(dict(source.parts.model.state_dict()), tmp_path / "dit.safetensors"))
    for engine in (source, loaded):
        engine.open_session("s", seed=1, prompt="p")
    assert np.array_equal(run_chunk(source, "s", [W]).frames, run_chunk(loaded, "s", [W]).frames)


def test_bfloat16_checkpoints_load_into_a_float32_engine(tmp_path: Path) -> None:
    state = {k: v.to(torch.bfloat16) for k, v in _dit_state().items()}
    engine = make_engine(weights=_save(state, tmp_path / "bf16.safetensors"))
    assert engine.parts.model.patch_embedding.weight.dtype == torch.float32


def test_missing_keys_are_listed(tmp_path: Path) -> None:
    state = _dit_state()
    del state["blocks.1.ffn.0.weight"]
    with pytest.raises(WeightsError) as info:
        make_engine(weights=_save(state, tmp_path / "w.safetensors"))
    assert info.value.code == "weights_mismatch"
    assert "missing keys (1): ['blocks.1.ffn.0.weight']" in info.value.message


def test_unexpected_keys_are_listed(tmp_path: Path) -> None:
    state = _dit_state()
    state["model.blocks.0.extra"] = torch.zeros(2)
    with pytest.raises(WeightsError) as info:
        make_engine(weights=_save(state, tmp_path / "w.safetensors"))
    assert "unexpected keys (1): ['model.blocks.0.extra']" in info.value.message


def test_shape_mismatches_are_listed(tmp_path: Path) -> None:
    state = _dit_state()
    state["head.head.weight"] = torch.zeros(8, 32)
    with pytest.raises(WeightsError) as info:
        make_engine(weights=_save(state, tmp_path / "w.safetensors"))
    assert "head.head.weight: checkpoint (8, 32) vs model (16, 32)" in info.value.message


def test_integer_tensors_are_a_dtype_error(tmp_path: Path) -> None:
    state = _dit_state()
    state["head.head.bias"] = torch.zeros(16, dtype=torch.int32)
    with pytest.raises(WeightsError) as info:
        make_engine(weights=_save(state, tmp_path / "w.safetensors"))
    assert info.value.code == "weights_dtype"
    assert "head.head.bias: torch.int32" in info.value.message


def test_a_file_that_is_not_safetensors_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(b"\x80\x04not safetensors")
    with pytest.raises(WeightsError) as info:
        make_engine(weights=path)
    assert info.value.code == "weights_unreadable"
    with pytest.raises(WeightsError) as info:
        make_engine(weights=tmp_path / "absent.safetensors")
    assert info.value.code == "weights_not_found"


def test_an_unsupported_engine_dtype_is_a_clear_error() -> None:
    with pytest.raises(ConfigError) as info:
        make_engine(dtype="float64")
    assert info.value.code == "bad_dtype"
    assert "['bfloat16', 'float16', 'float32']" in info.value.message


def test_a_text_to_video_checkpoint_without_action_keys_ignores_actions_exactly(tmp_path: Path) -> None:
    state = {k: v for k, v in _dit_state().items() if not k.startswith("action_")}
    engine = make_engine(weights=_save(state, tmp_path / "t2v.safetensors"))
    engine.open_session("w", seed=1, prompt="p")
    engine.open_session("a", seed=1, prompt="p")
    left = FrameAction(keys=("a", "shift"), mouse=(50.0, 20.0), buttons=3, axes=(1.0, -1.0))
    assert np.array_equal(run_chunk(engine, "w", [W]).frames, run_chunk(engine, "a", [left]).frames)


def test_partial_action_keys_are_missing_keys(tmp_path: Path) -> None:
    state = _dit_state()
    del state["action_embedding.2.bias"]
    with pytest.raises(WeightsError) as info:
        make_engine(weights=_save(state, tmp_path / "w.safetensors"))
    assert "action_embedding.2.bias" in info.value.message
