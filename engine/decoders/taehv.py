"""The `taehv` preview decoder: a small causal 2-D conv decoder with the TAEHV / taew2_1 layout.

Architecture and state-dict names follow the public tiny video autoencoder for Wan 2.1 (taew2_1;
decoder half): `decoder.N.*` indices of one Sequential, 16 latent channels -> 256 -> 128 -> 64
-> 64 features, three memory blocks per stage (each sees its input of the previous video frame),
2x spatial upsampling per stage, 2x temporal upsampling in the last two stages (one latent frame
-> 4 video frames; a stream's first 3 frames are dropped, as Wan's causal VAE yields 1 + 4(T-1)).
Latents go in as the DiT makes them. A checkpoint is the user's file (safetensors of the
`decoder.*` tensors; a file holding the `encoder.*` half as well loads too, that half ignored);
without one the weights are random (speed measurement only: the frames are noise).

Streaming: a memory block's "past" for the first frame of a chunk is its input's last frame of
the previous chunk; the cache holds those 9 frames per session (67 MB at 480x832 in bf16, against
1.9 GB for the Wan VAE's cache), so chunk-by-chunk decoding equals decoding the whole sequence.
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
from engine.errors import ConfigError

__all__ = ["TaehvCache", "TaehvDecoder", "build_taehv_decoder"]

_INIT_SEED = 4321
LATENT_CHANNELS = 16
FEATURES = (256, 128, 64, 64)
TIME_UPSCALE = (1, 2, 2)  # per stage (the first TGrow keeps the frame count)
IGNORED_PREFIX = "encoder."  # the encoder half of a full checkpoint


def _conv(n_in: int, n_out: int, bias: bool = True) -> nn.Conv2d:
    return nn.Conv2d(n_in, n_out, 3, padding=1, bias=bias)


class _Clamp(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x / 3) * 3


class _MemBlock(nn.Module):
    """relu(conv(cat(x, x of the previous frame)) + x): `conv.0/2/4` as the published layout."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            _conv(2 * channels, channels), nn.ReLU(), _conv(channels, channels), nn.ReLU(), _conv(channels, channels)
        )

    def forward(self, x: torch.Tensor, past: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(torch.cat([x, past], dim=1)) + x)


class _TGrow(nn.Module):
    """1x1 conv to `stride` times the channels, read as `stride` consecutive frames."""

    def __init__(self, channels: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.conv = nn.Conv2d(channels, channels * stride, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nt, c, h, w = x.shape
        return self.conv(x).reshape(nt * self.stride, c, h, w)


def _layers() -> nn.Sequential:
    layers: list[nn.Module] = [_Clamp(), _conv(LATENT_CHANNELS, FEATURES[0]), nn.ReLU()]
    for stage, stride in enumerate(TIME_UPSCALE):
        n = FEATURES[stage]
        layers += [_MemBlock(n), _MemBlock(n), _MemBlock(n), nn.Upsample(scale_factor=2), _TGrow(n, stride),
                   _conv(n, FEATURES[stage + 1], bias=False)]
    layers += [nn.ReLU(), _conv(FEATURES[-1], 3)]
    return nn.Sequential(*layers)


@dataclass(frozen=True)
class TaehvCache:
    """Each memory block's input of the last decoded video frame (1, C, h, w), in layer order;
    None before a stream's first chunk."""

    past: tuple[torch.Tensor, ...] | None


class TaehvDecoder(nn.Module):
    kind = "taehv"
    label = "TAEHV/taew2_1-layout preview decoder (random init unless a checkpoint is given)"

    def __init__(self) -> None:
        super().__init__()
        self.decoder = _layers()
        self.trim = 1
        for stride in TIME_UPSCALE:
            self.trim *= stride
        self.trim -= 1  # 3: a stream's first latent frame yields 1 frame, not 4
        self.memory_blocks = [m for m in self.decoder if isinstance(m, _MemBlock)]

    @torch.no_grad()
    def init_random(self, seed: int = _INIT_SEED) -> None:
        """He-style random init from the CPU generator (the same weights on every device)."""
        gen = torch.Generator(device="cpu").manual_seed(seed)
        for name, param in self.named_parameters():
            if name.endswith("bias"):
                param.zero_()
            else:
                fan_in = param[0].numel()
                param.copy_((torch.randn(param.shape, generator=gen) * (2.0 / fan_in) ** 0.5).to(param.dtype))

    # StreamingDecoder protocol ---------------------------------------------------------------
    def new_cache(self) -> TaehvCache:
        return TaehvCache(None)

    def is_first(self, cache: Any | None) -> bool:
        return cache is None or cache.past is None

    def frames_for(self, latent_frames: int, first: bool) -> int:
        frames = latent_frames * (self.trim + 1)
        return frames - self.trim if first else frames

    def cache_to(self, cache: TaehvCache, device: torch.device) -> TaehvCache:
        return TaehvCache(None if cache.past is None else tuple(t.to(device) for t in cache.past))

    def cache_bytes(self, latent_height: int, latent_width: int, dtype: torch.dtype) -> int:
        """Bytes of one session's cache at this latent size."""
        itemsize = torch.empty(0, dtype=dtype).element_size()
        total, h, w = 0, latent_height, latent_width
        for features in FEATURES[:3]:
            total += 3 * features * h * w
            h, w = 2 * h, 2 * w
        return total * itemsize

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        """Strict: every `decoder.*` tensor with its shape, nothing else but an ignored `encoder.*`."""
        load_strict(self, {k: v for k, v in state.items() if not k.startswith(IGNORED_PREFIX)}, "taehv decoder")

    @torch.no_grad()
    def decode(self, latents: torch.Tensor, caches: list[Any | None]) -> tuple[torch.Tensor, list[Any]]:
        b, c, t, h, w = latents.shape
        first = batch_starts(self, latents, caches)
        if c != LATENT_CHANNELS:
            raise ConfigError("bad_latents", f"the taehv decoder takes {LATENT_CHANNELS} latent channels, got {c}")
        x = latents.to(next(self.parameters()).dtype).transpose(1, 2).reshape(b * t, c, h, w)
        pasts: list[torch.Tensor] = []
        block = 0
        for layer in self.decoder:
            if isinstance(layer, _MemBlock):
                frames = x.shape[0] // b
                seq = x.view(b, frames, *x.shape[1:])
                if first:
                    before = torch.zeros_like(seq[:, :1])
                else:
                    before = torch.stack([cache.past[block] for cache in caches]).to(seq)  # type: ignore[union-attr]
                past = torch.cat([before, seq[:, :-1]], dim=1).view_as(x)
                pasts.append(seq[:, -1:])
                x = layer(x, past)
                block += 1
            else:
                x = layer(x)
        frames = x.shape[0] // b
        y = x.view(b, frames, *x.shape[1:])
        if first:
            y = y[:, self.trim :]
        rgb = (y.float().clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 1, 3, 4, 2)
        new = [TaehvCache(tuple(p[i].clone() for p in pasts)) for i in range(b)]
        return rgb.contiguous(), new


def build_taehv_decoder(config: ModelConfig, device: torch.device, dtype: torch.dtype) -> TaehvDecoder:
    if config.out_dim != LATENT_CHANNELS or config.vae_stride != (4, 8, 8):
        raise ConfigError(
            "bad_decoder", f"the taehv decoder needs {LATENT_CHANNELS} latent channels and strides (4, 8, 8); "
            f"model {config.name!r} has {config.out_dim} and {config.vae_stride}"
        )
    decoder = TaehvDecoder()
    decoder.init_random()
    return decoder.to(device=device, dtype=dtype).eval()
