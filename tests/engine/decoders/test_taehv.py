"""The TAEHV-layout preview decoder: the published state-dict names and shapes (strict loading),
chunk-by-chunk decoding equal to one whole-sequence decode, frame counts as Wan's VAE."""

from __future__ import annotations

import pytest
import torch

from engine.config import tiny_config
from engine.decoders.taehv import TaehvDecoder, build_taehv_decoder
from engine.errors import ConfigError, WeightsError

# the decoder half of taew2_1's state dict: Sequential indices of the published layout
EXPECTED = {
    "decoder.1.weight": (256, 16, 3, 3),
    "decoder.3.conv.0.weight": (256, 512, 3, 3),
    "decoder.5.conv.4.bias": (256,),
    "decoder.7.conv.weight": (256, 256, 1, 1),  # TGrow stride 1
    "decoder.8.weight": (128, 256, 3, 3),  # no bias
    "decoder.13.conv.weight": (256, 128, 1, 1),  # TGrow stride 2
    "decoder.14.weight": (64, 128, 3, 3),
    "decoder.19.conv.weight": (128, 64, 1, 1),
    "decoder.20.weight": (64, 64, 3, 3),
    "decoder.22.weight": (3, 64, 3, 3),
    "decoder.22.bias": (3,),
}


@pytest.fixture(scope="module")
def decoder() -> TaehvDecoder:
    d = TaehvDecoder()
    d.init_random()
    return d.eval()


def test_state_dict_layout_matches_taew2_1(decoder: TaehvDecoder) -> None:
    state = decoder.state_dict()
    assert len(state) == 64
    for key, shape in EXPECTED.items():
        assert tuple(state[key].shape) == shape, key
    assert "decoder.8.bias" not in state and not any(".skip." in k for k in state)
    assert sum(v.numel() for v in state.values()) == 9_844_611


def test_strict_loading_names_what_does_not_fit(decoder: TaehvDecoder) -> None:
    state = {k: v.clone() for k, v in decoder.state_dict().items()}
    fresh = TaehvDecoder()
    fresh.load_weights({**state, "encoder.0.weight": torch.zeros(64, 3, 3, 3)})  # the encoder half is ignored
    assert torch.equal(fresh.state_dict()["decoder.22.bias"], state["decoder.22.bias"])
    with pytest.raises(WeightsError) as info:
        fresh.load_weights({k: v for k, v in state.items() if k != "decoder.14.weight"})
    assert info.value.code == "weights_mismatch" and "decoder.14.weight" in str(info.value)
    with pytest.raises(WeightsError) as info:
        fresh.load_weights({**state, "decoder.7.conv.weight": torch.zeros(512, 256, 1, 1)})
    assert "decoder.7.conv.weight" in str(info.value)
    with pytest.raises(WeightsError):
        fresh.load_weights({**state, "decoder.99.weight": torch.zeros(1)})


def test_streaming_equals_whole_sequence(decoder: TaehvDecoder) -> None:
    latents = torch.randn(2, 16, 4, 3, 4, generator=torch.Generator().manual_seed(0))
    whole, _ = decoder.decode(latents, [None, None])
    first, caches = decoder.decode(latents[:, :, :1], [None, None])
    second, caches = decoder.decode(latents[:, :, 1:3], caches)
    third, _ = decoder.decode(latents[:, :, 3:], caches)
    assert whole.shape == (2, 13, 24, 32, 3) and whole.dtype == torch.uint8
    assert [first.shape[1], second.shape[1], third.shape[1]] == [1, 8, 4]
    assert torch.equal(torch.cat([first, second, third], dim=1), whole)
    assert decoder.frames_for(3, first=True) == 9 and decoder.frames_for(3, first=False) == 12
    assert decoder.cache_bytes(60, 104, torch.bfloat16) == 3 * 2 * (256 * 6240 + 128 * 24960 + 64 * 99840)


def test_taehv_needs_wan_latents() -> None:
    with pytest.raises(ConfigError) as info:
        build_taehv_decoder(tiny_config().with_overrides(decoder_kind="taehv"), torch.device("cpu"), torch.float32)
    assert info.value.code == "bad_decoder"
