"""Wan2.1 VAE decoder: streaming equals whole-sequence decoding, exact output geometry, and the
official parameter layout (checked against the manifest on the meta device)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pytest
import torch
import torch.nn.functional as F

from engine.config import tiny_config, wan_13b_config
from engine.decoders._wan_blocks import AttentionBlock, _upsample_2x
from engine.decoders._wan_layout import LAYOUTS, Candidate, memory_format, parse_candidate
from engine.decoders.wan_vae import (
    WanVAECache,
    WanVAEConfig,
    WanVAEDecoder,
    build_wan_vae_decoder,
    vae_config_for,
)
from engine.errors import ConfigError, EngineError

MANIFEST = Path(__file__).resolve().parents[2] / "fixtures" / "wan2.1_t2v_1.3b_manifest.json"
LATENT_H, LATENT_W = 4, 6


def _manifest_vae() -> dict:
    return json.loads(MANIFEST.read_text())["vae"]


def _tiny_decoder(seed: int = 0) -> WanVAEDecoder:
    torch.manual_seed(seed)
    decoder = WanVAEDecoder(WanVAEConfig.tiny()).eval()
    with torch.no_grad():  # non-zero attention projection so the mid block matters
        cast(AttentionBlock, decoder.decoder.middle[1]).proj.weight.normal_(std=0.2)
    return decoder


def _latents(batch: int, frames: int, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 4, frames, LATENT_H, LATENT_W, generator=generator)


def _stream(decoder: WanVAEDecoder, latents: torch.Tensor, chunk_sizes: list[int]) -> torch.Tensor:
    caches: Sequence[WanVAECache | None] = [None] * latents.shape[0]
    outputs, start = [], 0
    for size in chunk_sizes:
        rgb, caches = decoder.decode_rgb(latents[:, :, start : start + size], list(caches))
        outputs.append(rgb)
        start += size
    return torch.cat(outputs, dim=2)


def _max_rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual - expected).abs().max() / expected.abs().max())


def test_wan21_decoder_parameters_equal_the_manifest_keys_and_shapes() -> None:
    vae = _manifest_vae()
    with torch.device("meta"):
        decoder = WanVAEDecoder(WanVAEConfig.wan21())
    state = decoder.state_dict()
    assert list(state) == vae["decoder"]["keys"]
    assert {k: list(v.shape) for k, v in state.items()} == {
        k: vae["keys"][k]["shape"] for k in vae["decoder"]["keys"]
    }
    assert sum(v.numel() for v in state.values()) == vae["decoder"]["num_params"] == 73_295_603


def test_wan21_config_matches_the_manifest_constructor_and_latent_statistics() -> None:
    vae = _manifest_vae()
    config = WanVAEConfig.wan21()
    args = vae["constructor_args"]
    assert config.base_channels == args["dim"] == 96
    assert config.z_channels == args["z_dim"] == 16
    assert list(config.channel_multipliers) == args["dim_mult"]
    assert list(config.temporal_upsample) == args["temperal_downsample"][::-1]
    assert list(config.latent_mean) == vae["latent_mean"]
    assert list(config.latent_std) == vae["latent_std"]
    assert (config.temporal_stride, config.spatial_stride) == (4, 8)


@pytest.mark.parametrize("chunk_sizes", [[2, 1, 2], [1, 1, 1, 1, 1], [3, 2]])
def test_streaming_decode_chunk_by_chunk_equals_decoding_the_whole_sequence(chunk_sizes: list[int]) -> None:
    decoder = _tiny_decoder()
    latents = _latents(batch=1, frames=5)
    whole, _ = decoder.decode_rgb(latents, [None])
    streamed = _stream(decoder, latents, chunk_sizes)
    assert streamed.shape == whole.shape == (1, 3, 17, 8 * LATENT_H, 8 * LATENT_W)
    assert _max_rel_err(streamed, whole) <= 1e-5


def test_batched_decode_equals_each_session_decoded_alone() -> None:
    decoder = _tiny_decoder()
    latents = _latents(batch=2, frames=4)
    batched = _stream(decoder, latents, [2, 2])
    for b in range(2):
        alone = _stream(decoder, latents[b : b + 1], [2, 2])
        assert _max_rel_err(batched[b : b + 1], alone) <= 1e-5


def test_first_chunk_yields_one_plus_four_per_later_latent_frame_then_four_each() -> None:
    decoder = _tiny_decoder()
    assert [decoder.frames_for(3, first=True), decoder.frames_for(3, first=False)] == [9, 12]
    assert [decoder.frames_for(1, first=True), decoder.frames_for(1, first=False)] == [1, 4]
    latents = _latents(batch=2, frames=6)
    first, caches = decoder.decode(latents[:, :, :3], [None, None])
    later, _ = decoder.decode(latents[:, :, 3:], list(caches))
    assert first.dtype == later.dtype == torch.uint8
    assert tuple(first.shape) == (2, 9, 32, 48, 3)
    assert tuple(later.shape) == (2, 12, 32, 48, 3)


def test_uint8_frames_are_the_clamped_rgb_output_scaled_to_0_255() -> None:
    decoder = _tiny_decoder()
    latents = _latents(batch=1, frames=2)
    rgb, _ = decoder.decode_rgb(latents, [None])
    frames, _ = decoder.decode(latents, [None])
    expected = ((rgb.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 4, 1)
    assert torch.equal(frames, expected)


def test_decode_leaves_the_input_caches_untouched() -> None:
    decoder = _tiny_decoder()
    latents = _latents(batch=1, frames=4)
    _, caches = decoder.decode(latents[:, :, :2], [None])
    before = [t.clone() for t in caches[0].histories]
    again_a, _ = decoder.decode_rgb(latents[:, :, 2:], list(caches))
    again_b, _ = decoder.decode_rgb(latents[:, :, 2:], list(caches))
    assert all(torch.equal(a, b) for a, b in zip(before, caches[0].histories, strict=True))
    assert torch.equal(again_a, again_b)


def test_cache_holds_two_frames_per_causal_conv_and_cache_bytes_predicts_it() -> None:
    decoder = _tiny_decoder()
    _, caches = decoder.decode(_latents(batch=1, frames=2), [None])
    assert len(caches[0].histories) == 32  # 33 causal convs in the Wan decoder, minus the 1x1x1 shortcut
    assert {t.shape[1] for t in caches[0].histories} == {2}
    assert caches[0].nbytes == decoder.cache_bytes(LATENT_H, LATENT_W, torch.float32)


def test_latents_are_unnormalised_with_the_configured_mean_and_std() -> None:
    decoder = _tiny_decoder()
    plain_config = WanVAEConfig.tiny()
    plain = WanVAEDecoder(
        WanVAEConfig(**{**plain_config.__dict__, "latent_mean": (0.0,) * 4, "latent_std": (1.0,) * 4})
    )
    plain.load_state_dict(decoder.state_dict())
    latents = _latents(batch=1, frames=2)
    mean = torch.tensor(plain_config.latent_mean).view(1, 4, 1, 1, 1)
    std = torch.tensor(plain_config.latent_std).view(1, 4, 1, 1, 1)
    normalised, _ = decoder.decode_rgb(latents, [None])
    raw, _ = plain.decode_rgb(latents * std + mean, [None])
    assert _max_rel_err(normalised, raw) <= 1e-5


def test_a_batch_mixing_new_and_continuing_streams_is_rejected() -> None:
    decoder = _tiny_decoder()
    latents = _latents(batch=2, frames=2)
    _, caches = decoder.decode(latents[:1], [None])
    with pytest.raises(EngineError) as err:
        decoder.decode(latents, [caches[0], None])
    assert err.value.code == "mixed_decoder_batch"


def test_latents_with_the_wrong_channel_count_are_rejected() -> None:
    decoder = _tiny_decoder()
    with pytest.raises(EngineError) as err:
        decoder.decode(torch.zeros(1, 3, 2, LATENT_H, LATENT_W), [None])
    assert err.value.code == "bad_latents"
    assert "(B, 4, T>=1, h, w)" in str(err.value)


def test_one_cache_per_session_is_required() -> None:
    decoder = _tiny_decoder()
    with pytest.raises(EngineError) as err:
        decoder.decode(_latents(batch=2, frames=1), [None])
    assert err.value.code == "bad_decoder_batch"


def test_a_cache_from_another_resolution_is_rejected() -> None:
    decoder = _tiny_decoder()
    _, caches = decoder.decode(_latents(batch=1, frames=1), [None])
    with pytest.raises(EngineError) as err:
        decoder.decode(torch.zeros(1, 4, 1, LATENT_H + 2, LATENT_W), list(caches))
    assert err.value.code == "bad_decoder_cache"


def test_a_new_cache_decodes_a_first_chunk_like_no_cache() -> None:
    decoder = _tiny_decoder()
    latents = _latents(batch=1, frames=3)
    fresh = decoder.new_cache()
    assert decoder.is_first(fresh) and decoder.is_first(None)
    with_new, _ = decoder.decode_rgb(latents, [fresh])
    with_none, caches = decoder.decode_rgb(latents, [None])
    assert torch.equal(with_new, with_none)
    assert not decoder.is_first(caches[0])


def test_build_wan_vae_decoder_follows_the_model_config_and_its_wan_vae_override() -> None:
    config = tiny_config().with_overrides(decoder_kind="wan_vae", extra={"wan_vae": WanVAEConfig.tiny()})
    decoder = build_wan_vae_decoder(config, torch.device("cpu"), torch.float32)
    assert isinstance(decoder, WanVAEDecoder) and decoder.kind == "wan_vae"
    assert decoder.config == WanVAEConfig.tiny()
    assert (decoder.latent_std.dtype, decoder.conv2.weight.dtype) == (torch.float32, torch.float32)
    frames, _ = decoder.decode(torch.zeros(1, 4, 2, 4, 4), [decoder.new_cache()])
    assert tuple(frames.shape) == (1, 5, 32, 32, 3)


def test_a_model_whose_latents_do_not_fit_the_wan_vae_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        vae_config_for(tiny_config())  # 4 latent channels, the Wan2.1 VAE takes 16
    assert err.value.code == "bad_vae_config"
    assert "extra['wan_vae']" in str(err.value)


def test_the_wan_13b_model_gets_the_wan21_vae() -> None:
    assert vae_config_for(wan_13b_config()) == WanVAEConfig.wan21()


def test_channels_last_activations_decode_the_same_stream_as_ncdhw() -> None:
    reference, channels_last = _tiny_decoder(), _tiny_decoder()
    channels_last.set_layout("channels_last")
    latents = _latents(batch=2, frames=5)
    expected = _stream(reference, latents, [3, 2])
    assert _max_rel_err(_stream(channels_last, latents, [3, 2]), expected) <= 1e-5
    assert channels_last.conv2.weight.is_contiguous(memory_format=torch.channels_last_3d)


def test_a_cache_made_in_one_layout_continues_in_the_other() -> None:
    reference, channels_last = _tiny_decoder(), _tiny_decoder()
    channels_last.set_layout("channels_last")
    latents = _latents(batch=1, frames=4)
    _, caches = reference.decode_rgb(latents[:, :, :2], [None])
    mixed, _ = channels_last.decode_rgb(latents[:, :, 2:], list(caches))
    _, same_caches = reference.decode_rgb(latents[:, :, :2], [None])
    expected, _ = reference.decode_rgb(latents[:, :, 2:], list(same_caches))
    assert _max_rel_err(mixed, expected) <= 1e-5


def test_choose_layout_times_both_layouts_and_keeps_the_faster() -> None:
    decoder = _tiny_decoder()
    timings = decoder.choose_layout(latent_frames=2, latent_height=LATENT_H, latent_width=LATENT_W)
    assert set(timings) == {"ncdhw", "channels_last"} and min(timings.values()) > 0
    assert decoder.layout == min(timings, key=lambda name: timings[name])


def test_an_unknown_layout_is_rejected() -> None:
    with pytest.raises(EngineError) as err:
        _tiny_decoder().set_layout("nhwc")
    assert err.value.code == "bad_vae_layout"


def test_cudnn_benchmarking_applies_only_during_a_decode_call() -> None:
    decoder = _tiny_decoder()
    decoder.set_layout("ncdhw", cudnn_benchmark=True)
    before = torch.backends.cudnn.benchmark
    frames, _ = decoder.decode(_latents(batch=1, frames=1), [None])
    assert torch.backends.cudnn.benchmark == before
    assert tuple(frames.shape) == (1, 1, 32, 48, 3)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_2x_upsample_equals_nearest_interpolation_and_keeps_the_layout(layout: str) -> None:
    x = torch.randn(2, 3, 4, 5, 6).contiguous(memory_format=memory_format(layout))
    y = _upsample_2x(x)
    assert torch.equal(y, F.interpolate(x, scale_factor=(1.0, 2.0, 2.0), mode="nearest"))
    assert y.is_contiguous(memory_format=memory_format(layout))


@pytest.mark.parametrize("name", ["ncdhw", "channels_last+cudnn_benchmark", "ncdhw+fused",
                                  "channels_last+cudnn_benchmark+fused"])
def test_decoder_candidates_are_named_and_parsed_back(name: str) -> None:
    assert parse_candidate(name).name == name
    assert parse_candidate("channels_last+fused") == Candidate("channels_last", benchmark=False, fused=True)
