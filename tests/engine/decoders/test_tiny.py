"""The tiny decoder streams like a causal decoder and keeps its caches functional."""

from __future__ import annotations

import pytest
import torch

from engine.config import tiny_config
from engine.decoders.tiny import build_tiny_decoder


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
