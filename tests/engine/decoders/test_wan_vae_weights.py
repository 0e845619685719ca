"""Loading Wan2.1 VAE weights into the streaming decoder: the decoder half, strictly."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from engine.decoders.wan_vae import WanVAEConfig, WanVAEDecoder
from engine.decoders.wan_vae_weights import load_wan_vae_file, load_wan_vae_state_dict
from engine.errors import WeightsError


def _decoder() -> WanVAEDecoder:
    return WanVAEDecoder(WanVAEConfig.tiny())


def _full_vae_state(seed: int = 3) -> dict[str, torch.Tensor]:
    """A state dict laid out like Wan2.1_VAE.pth: encoder half, conv1, conv2 and decoder."""
    torch.manual_seed(seed)
    state = {k: torch.randn_like(v) for k, v in _decoder().state_dict().items()}
    state["encoder.conv1.weight"] = torch.randn(4, 3, 3, 3, 3)
    state["conv1.weight"] = torch.randn(8, 8, 1, 1, 1)
    return state


def test_a_full_vae_state_dict_loads_its_decoder_half_exactly() -> None:
    state = _full_vae_state()
    decoder = _decoder()
    load_wan_vae_state_dict(decoder, state)
    loaded = decoder.state_dict()
    assert set(loaded) == set(state) - {"encoder.conv1.weight", "conv1.weight"}
    assert all(torch.equal(loaded[k], state[k]) for k in loaded)


def test_a_missing_decoder_key_is_rejected_by_name() -> None:
    state = _full_vae_state()
    del state["decoder.head.2.bias"]
    with pytest.raises(WeightsError) as err:
        load_wan_vae_state_dict(_decoder(), state)
    assert err.value.code == "vae_missing_keys"
    assert "decoder.head.2.bias" in str(err.value)


def test_an_unknown_decoder_key_is_rejected_by_name() -> None:
    state = _full_vae_state()
    state["decoder.upsamples.99.residual.0.gamma"] = torch.ones(4, 1, 1, 1)
    with pytest.raises(WeightsError) as err:
        load_wan_vae_state_dict(_decoder(), state)
    assert err.value.code == "vae_unexpected_keys"
    assert "decoder.upsamples.99.residual.0.gamma" in str(err.value)


def test_a_shape_mismatch_is_rejected_with_both_shapes() -> None:
    state = _full_vae_state()
    state["conv2.weight"] = torch.zeros(4, 4, 3, 1, 1)
    with pytest.raises(WeightsError) as err:
        load_wan_vae_state_dict(_decoder(), state)
    assert err.value.code == "vae_shape_mismatch"
    assert "conv2.weight (4, 4, 3, 1, 1) != (4, 4, 1, 1, 1)" in str(err.value)


def test_integer_tensors_are_rejected_as_a_wrong_dtype() -> None:
    state = _full_vae_state()
    state["conv2.bias"] = torch.zeros(4, dtype=torch.int64)
    with pytest.raises(WeightsError) as err:
        load_wan_vae_state_dict(_decoder(), state)
    assert err.value.code == "vae_bad_dtype"


def test_a_pth_file_and_a_safetensors_file_load_the_same_weights(tmp_path: Path) -> None:
    state = _full_vae_state()
    torch.save(state, tmp_path / "vae.pth")
    save_file(state, str(tmp_path / "vae.safetensors"))
    from_pth, from_st = _decoder(), _decoder()
    load_wan_vae_file(from_pth, tmp_path / "vae.pth")
    load_wan_vae_file(from_st, tmp_path / "vae.safetensors")
    a, b = from_pth.state_dict(), from_st.state_dict()
    assert all(torch.equal(a[k], b[k]) and torch.equal(a[k], state[k]) for k in a)


def test_a_pickle_holding_more_than_tensors_is_refused(tmp_path: Path) -> None:
    torch.save({"decoder": _full_vae_state(), "note": "trainer state"}, tmp_path / "vae.pth")
    with pytest.raises(WeightsError) as err:
        load_wan_vae_file(_decoder(), tmp_path / "vae.pth")
    assert err.value.code == "vae_file_layout"


def test_a_missing_file_and_an_unknown_suffix_are_named(tmp_path: Path) -> None:
    with pytest.raises(WeightsError) as missing:
        load_wan_vae_file(_decoder(), tmp_path / "absent.pth")
    (tmp_path / "vae.bin").write_bytes(b"\0")
    with pytest.raises(WeightsError) as suffix:
        load_wan_vae_file(_decoder(), tmp_path / "vae.bin")
    assert (missing.value.code, suffix.value.code) == ("vae_file_missing", "vae_file_type")
