"""Config validation, RoPE, text encoder, sampling schedule and the tiny decoder."""

from __future__ import annotations

import math

import pytest
import torch

from engine.config import tiny_config, wan_13b_config
from engine.decoders.tiny import build_tiny_decoder
from engine.errors import ConfigError
from engine.rope import RopeTable, apply_rope, rope_axis_dims
from engine.sampling import Schedule, noise_seed
from engine.text import EmbeddingCache, HashTextEncoder, tokenize


def test_an_inconsistent_config_names_every_problem() -> None:
    with pytest.raises(ConfigError) as info:
        tiny_config().with_overrides(dim=33, window_chunks=0, decoder_kind="")
    assert info.value.code == "bad_config"
    for fragment in ("dim 33 is not divisible by num_heads 2", "window_chunks >= 1", "decoder_kind must name a decoder"):
        assert fragment in info.value.message


def test_sampling_settings_out_of_range_are_named() -> None:
    with pytest.raises(ConfigError) as info:
        tiny_config().with_overrides(denoise_timesteps=(1000.0, 0.0), action_guidance=0.0,
                                          action_guidance_steps=3, cache_context_noise=-0.1)
    assert info.value.code == "bad_config"
    for fragment in ("denoise_timesteps must lie in (0, 1000]", "action_guidance must be > 0",
                     "action_guidance_steps must lie in [0, 2]", "cache_context_noise must be >= 0"):
        assert fragment in info.value.message


def test_wan_geometry_is_derived_from_the_config() -> None:
    c = wan_13b_config()
    assert (c.head_dim, c.tokens_per_frame, c.tokens_per_chunk, c.frames_per_chunk) == (128, 1560, 4680, 12)
    assert c.context_chunks == 7  # sink 1 + window 6: the reference's 21-frame global cache


def test_rope_axis_split_follows_wan() -> None:
    assert rope_axis_dims(128) == (44, 42, 42)
    assert rope_axis_dims(16) == (8, 4, 4)


def test_rope_matches_complex_rotation_at_absolute_positions() -> None:
    table = RopeTable(head_dim=16, grid_hw=(2, 3), frames_per_chunk=2, theta=10000.0, max_frames=4, device=torch.device("cpu"))
    cos, sin = table.for_frames([5], frames=2)  # grows past max_frames
    assert table.max_frames >= 7
    x = torch.randn(1, 12, 1, 16, dtype=torch.float64).float()
    out = apply_rope(x, cos, sin)
    # token 7 = frame 5 + 1, row 0, col 1: its angles from the three axes
    dt, dh, dw = rope_axis_dims(16)

    def freqs(dim: int) -> list[float]:
        return [1.0 / 10000.0 ** (i / dim) for i in range(0, dim, 2)]

    angles = [6 * f for f in freqs(dt)] + [0 * f for f in freqs(dh)] + [1 * f for f in freqs(dw)]
    z = torch.view_as_complex(x[0, 7, 0].double().view(-1, 2).contiguous())
    rotated = z * torch.polar(torch.ones(len(angles), dtype=torch.float64), torch.tensor(angles, dtype=torch.float64))
    assert torch.allclose(out[0, 7, 0].double(), torch.view_as_real(rotated).flatten(), atol=1e-6)


def test_rope_tables_are_float32() -> None:
    table = RopeTable(16, (2, 2), 1, 10000.0, 8, torch.device("cpu"))
    cos, sin = table.for_frames([0, 3], frames=1)
    assert (cos.dtype, sin.dtype, tuple(cos.shape)) == (torch.float32, torch.float32, (2, 4, 1, 8))


def test_tokenizer_lowercases_words_and_drops_punctuation() -> None:
    assert tokenize("Snowy HILLS, at night!") == ["snowy", "hills", "at", "night"]


def test_hash_encoder_is_deterministic_and_zero_padded() -> None:
    config = tiny_config()
    one, two = HashTextEncoder(config), HashTextEncoder(config)
    one.init_random()
    two.init_random()
    a, b = one.encode(["red desert"]), two.encode(["red desert"])
    assert torch.equal(a, b)
    assert a.shape == (1, config.text_len, config.text_dim)
    assert torch.count_nonzero(a[0, 2:]) == 0
    assert not torch.equal(a, one.encode(["desert red"]))


def test_hash_encoder_caps_tokens_at_text_len() -> None:
    encoder = HashTextEncoder(tiny_config())
    assert len(encoder.token_ids(" ".join(["w"] * 50))) == tiny_config().text_len


def test_embedding_cache_hits_by_content_and_evicts_least_recent() -> None:
    encoder = HashTextEncoder(tiny_config())
    cache = EmbeddingCache(encoder, capacity=2)
    cache.get("a")
    cache.get("b")
    cache.get("a")
    cache.get("c")  # evicts "b"
    assert (cache.hits, cache.misses, len(cache)) == (1, 3, 2)
    cache.get("b")
    assert cache.misses == 4


def test_schedule_shifts_sigmas_like_flow_matching() -> None:
    schedule = Schedule.from_config(tiny_config())
    expected = [5 * s / (1 + 4 * s) for s in (1.0, 0.75, 0.5, 0.25)]
    assert all(math.isclose(a, b) for a, b in zip(schedule.sigmas, expected, strict=True))
    assert schedule.timestep(0) == 1000.0


def test_noise_seeds_differ_by_session_chunk_and_step() -> None:
    seeds = {noise_seed(1, 0, 0), noise_seed(2, 0, 0), noise_seed(1, 1, 0), noise_seed(1, 0, 1)}
    assert len(seeds) == 4
    assert noise_seed(1, 0, 0) == noise_seed(1, 0, 0)


def test_tiny_decoder_streams_like_a_causal_decoder() -> None:
    config = tiny_config()
    decoder = build_tiny_decoder(config, torch.device("cpu"), torch.float32)
    latents = torch.randn(1, config.out_dim, 4, config.latent_height, config.latent_width)
    whole, _ = decoder.decode(latents, [None])
    first, caches = decoder.decode(latents[:, :, :2], [None])
    second, _ = decoder.decode(latents[:, :, 2:], caches)
    assert (first.shape[1], second.shape[1]) == (decoder.frames_for(2, True), decoder.frames_for(2, False)) == (5, 8)
    assert torch.equal(torch.cat([first, second], dim=1), whole)
    assert whole.dtype == torch.uint8 and whole.shape[-1] == 3


def test_tiny_decoder_does_not_mutate_the_caches_it_is_given() -> None:
    config = tiny_config()
    decoder = build_tiny_decoder(config, torch.device("cpu"), torch.float32)
    latents = torch.randn(1, config.out_dim, 2, config.latent_height, config.latent_width)
    _, caches = decoder.decode(latents, [None])
    kept = caches[0].last.clone()
    decoder.decode(latents + 1, caches)
    assert torch.equal(caches[0].last, kept)


def test_decoding_first_and_steady_caches_together_is_refused() -> None:
    config = tiny_config()
    decoder = build_tiny_decoder(config, torch.device("cpu"), torch.float32)
    latents = torch.randn(2, config.out_dim, 2, config.latent_height, config.latent_width)
    _, caches = decoder.decode(latents[:1], [None])
    with pytest.raises(ValueError, match="all first chunks or none"):
        decoder.decode(latents, [None, caches[0]])
