"""The `tiny` decoder: a small random-init causal conv upsampler, labelled as such.

It stands in for a real VAE in tests and quick runs: each latent frame, together with the previous
one (its only temporal cache), is mapped by two convolutions to `t_stride` RGB frames upsampled
`s_stride` times by pixel shuffle. A first chunk's first latent frame yields one frame, as Wan's
causal VAE does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from engine.config import ModelConfig
from engine.decoders.base import batch_starts
from engine.decoders.weights import load_strict

__all__ = ["TinyCache", "TinyDecoder", "build_tiny_decoder"]

_INIT_SEED = 1234


@dataclass(frozen=True)
class TinyCache:
    last: torch.Tensor | None  # (C, h, w): the previous latent frame; None before the first chunk


class TinyDecoder(nn.Module):
    kind = "tiny"
    label = "tiny random-init conv upsampler (not a trained VAE)"

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.channels = config.out_dim
        self.t_stride, s_h, s_w = config.vae_stride
        if s_h != s_w:
            raise ValueError("the tiny decoder needs equal spatial strides")
        self.s_stride = s_h
        hidden = config.tiny_decoder_hidden
        self.conv_in = nn.Conv2d(2 * self.channels, hidden, kernel_size=3, padding=1)
        self.conv_out = nn.Conv2d(hidden, self.t_stride * 3 * self.s_stride**2, kernel_size=1)

    @torch.no_grad()
    def init_random(self, seed: int = _INIT_SEED) -> None:
        gen = torch.Generator(device="cpu").manual_seed(seed)
        for param in self.parameters():
            values = torch.randn(param.shape, generator=gen) * (0.5 / max(1, param[0].numel()) ** 0.5)
            param.copy_(values.to(param.dtype))

    def new_cache(self) -> TinyCache:
        return TinyCache(last=None)

    def is_first(self, cache: Any | None) -> bool:
        return cache is None or cache.last is None

    def frames_for(self, latent_frames: int, first: bool) -> int:
        return 1 + self.t_stride * (latent_frames - 1) if first else self.t_stride * latent_frames

    def cache_to(self, cache: TinyCache, device: torch.device) -> TinyCache:
        return TinyCache(None if cache.last is None else cache.last.to(device))

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        load_strict(self, state, "tiny decoder")

    @torch.no_grad()
    def decode(self, latents: torch.Tensor, caches: list[Any | None]) -> tuple[torch.Tensor, list[Any]]:
        b, c, t, h, w = latents.shape
        first = batch_starts(self, latents, caches)
        x = latents.to(self.conv_in.weight.dtype)
        # the latent frame before each one: a first chunk repeats its first frame (causal padding)
        prev0 = x[:, :, 0] if first else torch.stack([cache.last for cache in caches]).to(x)  # type: ignore[union-attr]
        prev = torch.cat([prev0.unsqueeze(2), x[:, :, :-1]], dim=2)  # (B, C, T, h, w)
        pairs = torch.cat([prev, x], dim=1).transpose(1, 2).reshape(b * t, 2 * c, h, w)
        y = self.conv_out(F.silu(self.conv_in(pairs)))  # (B*T, ts*3*s*s, h, w)
        y = F.pixel_shuffle(y, self.s_stride)  # (B*T, ts*3, H, W)
        y = y.view(b, t * self.t_stride, 3, h * self.s_stride, w * self.s_stride)
        if first:
            y = y[:, self.t_stride - 1 :]
        frames = (torch.sigmoid(y.float()) * 255).round().to(torch.uint8).permute(0, 1, 3, 4, 2)
        new = [TinyCache(last=x[i, :, -1].clone()) for i in range(b)]
        return frames.contiguous(), new


def build_tiny_decoder(config: ModelConfig, device: torch.device, dtype: torch.dtype) -> TinyDecoder:
    decoder = TinyDecoder(config)
    decoder.init_random()
    return decoder.to(device=device, dtype=dtype).eval()
