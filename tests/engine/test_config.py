"""ModelConfig: every problem of an inconsistent config named at once; derived geometry."""

from __future__ import annotations

import pytest

from engine.config import tiny_config, wan_13b_config
from engine.errors import ConfigError


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
