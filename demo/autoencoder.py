"""The demo autoencoder: 8x (or 4x) spatial compression, no temporal compression.

One latent frame is one video frame, so the decoder needs no temporal state: its streaming
cache only counts decoded frames. Latents leave the encoder normalised (per-channel mean/std
measured after training, kept as buffers) and the decoder undoes it, so the DiT sees
unit-scale latents. The decoder is the engine's `demo_ae` streaming decoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from engine.config import ModelConfig
from engine.decoders.weights import load_strict
from engine.errors import ConfigError

__all__ = ["AEConfig", "DemoCache", "DemoDecoder", "DemoEncoder", "ae_config_for", "build_demo_decoder"]


@dataclass(frozen=True)
class AEConfig:
    latent_channels: int = 8
    downsample: int = 8  # 3 halvings (8) or 2 (4: the latent cell is 4 px)
    enc_channels: tuple[int, int, int] = (32, 64, 128)  # at 1/2, 1/4, 1/8 (the last is also used at 1/4 for 4x)
    dec_channels: tuple[int, int, int, int] = (128, 64, 32, 16)  # at 1/8 (8x only), 1/4, 1/2, 1/1
    dec_blocks_low: int = 2  # residual blocks at the latent resolution

    def __post_init__(self) -> None:
        if self.downsample not in (4, 8):
            raise ConfigError("bad_config", f"the demo autoencoder downsamples 4x or 8x, not {self.downsample}x")

    @property
    def deep(self) -> bool:
        """Three halvings (8x) rather than two."""
        return self.downsample == 8


class _Res(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.silu(self.conv1(F.silu(x))))


class DemoEncoder(nn.Module):
    """(N, 3, H, W) in [-1, 1] -> normalised latents (N, C, H/d, W/d), d = cfg.downsample."""

    latent_mean: torch.Tensor
    latent_std: torch.Tensor

    def __init__(self, cfg: AEConfig) -> None:
        super().__init__()
        c1, c2, c3 = cfg.enc_channels
        self.conv_in = nn.Conv2d(3, c1, 3, padding=1)
        self.down1 = nn.Conv2d(c1, c2, 4, stride=2, padding=1)
        self.res1 = _Res(c2)
        self.down2 = nn.Conv2d(c2, c3, 4, stride=2, padding=1)
        self.res2 = _Res(c3)
        if cfg.deep:
            self.down3 = nn.Conv2d(c3, c3, 4, stride=2, padding=1)
            self.res3 = _Res(c3)
        self.deep = cfg.deep
        self.conv_out = nn.Conv2d(c3, cfg.latent_channels, 3, padding=1)
        self.register_buffer("latent_mean", torch.zeros(cfg.latent_channels))
        self.register_buffer("latent_std", torch.ones(cfg.latent_channels))

    def raw(self, x: torch.Tensor) -> torch.Tensor:
        """Latents before normalisation."""
        h = F.silu(self.conv_in(x))
        h = self.res1(self.down1(h))
        h = self.res2(self.down2(F.silu(h)))
        if self.deep:
            h = self.res3(self.down3(F.silu(h)))
        return self.conv_out(F.silu(h))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.raw(x)
        return (z - self.latent_mean[:, None, None]) / self.latent_std[:, None, None]


@dataclass(frozen=True)
class DemoCache:
    """A session's decoder state: only how many frames it decoded (frames are independent)."""

    frames: int = 0


class DemoDecoder(nn.Module):
    """Normalised latents (N, C, h, w) -> (N, 3, dh, dw) in [-1, 1] (not clamped), d = cfg.downsample.

    Also the engine's StreamingDecoder of kind ``demo_ae``: ``decode`` maps (B, C, T, h, w)
    latents to uint8 (B, T, dh, dw, 3) frames. The 4x decoder is the 8x one without its lowest
    stage: it starts at 1/4 with dec_channels[1] channels.
    """

    kind = "demo_ae"
    latent_mean: torch.Tensor
    latent_std: torch.Tensor
    label = "demo autoencoder decoder (trained with the demo model; per frame, spatial only)"

    def __init__(self, cfg: AEConfig) -> None:
        super().__init__()
        c0, c1, c2, c3 = cfg.dec_channels
        low = c0 if cfg.deep else c1
        self.conv_in = nn.Conv2d(cfg.latent_channels, low, 3, padding=1)
        self.res_low = nn.ModuleList([_Res(low) for _ in range(cfg.dec_blocks_low)])
        if cfg.deep:
            self.up1 = nn.ConvTranspose2d(c0, c1, 2, stride=2)
            self.res_mid = _Res(c1)
        self.deep = cfg.deep
        self.up2 = nn.ConvTranspose2d(c1, c2, 2, stride=2)
        self.conv_mid = nn.Conv2d(c2, c2, 3, padding=1)
        self.up3 = nn.ConvTranspose2d(c2, c3, 2, stride=2)
        self.conv_high = nn.Conv2d(c3, c3, 3, padding=1)
        self.conv_out = nn.Conv2d(c3, 3, 3, padding=1)
        self.register_buffer("latent_mean", torch.zeros(cfg.latent_channels))
        self.register_buffer("latent_std", torch.ones(cfg.latent_channels))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        z = z * self.latent_std[:, None, None] + self.latent_mean[:, None, None]
        h = self.conv_in(z)
        for block in self.res_low:
            h = block(h)
        if self.deep:
            h = self.res_mid(self.up1(F.silu(h)))  # (N, c1, 1/4 of the frame)
        h = F.silu(self.conv_mid(F.silu(self.up2(F.silu(h)))))  # (N, c2, 1/2)
        h = F.silu(self.conv_high(F.silu(self.up3(h))))  # (N, c3, full size)
        return self.conv_out(h)

    def to_uint8(self, z: torch.Tensor) -> torch.Tensor:
        """Normalised latents (N, C, h, w) -> uint8 frames (N, dh, dw, 3)."""
        x = self.forward(z).float()
        return ((x.clamp(-1.0, 1.0) + 1.0) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 1)

    # StreamingDecoder ----------------------------------------------------------------------
    def new_cache(self) -> DemoCache:
        return DemoCache()

    def is_first(self, cache: Any | None) -> bool:
        return cache is None or cache.frames == 0

    def frames_for(self, latent_frames: int, first: bool) -> int:
        return latent_frames

    def cache_to(self, cache: DemoCache, device: torch.device) -> DemoCache:
        return cache

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        load_strict(self, state, "demo_ae decoder")

    @torch.no_grad()
    def decode(self, latents: torch.Tensor, caches: list[Any | None]) -> tuple[torch.Tensor, list[Any]]:
        b, c, t, h, w = latents.shape
        if len(caches) != b:
            raise ValueError(f"decode needs one cache per sample: {b} samples, {len(caches)} caches")
        flat = latents.transpose(1, 2).reshape(b * t, c, h, w).to(self.conv_in.weight.dtype)
        if self.conv_in.weight.is_contiguous(memory_format=torch.channels_last):  # see build_demo_decoder
            flat = flat.contiguous(memory_format=torch.channels_last)
        frames = self.to_uint8(flat)  # (B*T, H, W, 3); from channels_last already contiguous
        done = [0 if cache is None else cache.frames for cache in caches]
        return frames.view(b, t, *frames.shape[1:]).contiguous(), [DemoCache(n + t) for n in done]


def ae_config_for(config: ModelConfig) -> AEConfig:
    """The autoencoder shape a model config implies (its latent channels and spatial stride)."""
    return AEConfig(latent_channels=config.out_dim, downsample=config.vae_stride[1])


def build_demo_decoder(config: ModelConfig, device: torch.device, dtype: torch.dtype) -> DemoDecoder:
    """The engine's hook for decoder kind ``demo_ae`` (weights come from the checkpoint)."""
    if config.vae_stride[0] != 1 or config.vae_stride[1] not in (4, 8) or config.vae_stride[2] != config.vae_stride[1]:
        raise ConfigError("bad_config", f"the demo_ae decoder upsamples (1, 8, 8) or (1, 4, 4); model "
                          f"{config.name!r} asks vae_stride {config.vae_stride}")
    decoder = DemoDecoder(ae_config_for(config)).to(device=device, dtype=dtype).eval()
    if device.type == "cpu":
        # channels-last convolutions: measured on the 2-core box (1 thread, a 4-frame chunk) 17.4 -> 10.9 ms
        # in bf16 and 27.9 -> 19.6 ms in fp32 for the decoder alone; the served demo chunk 195.7 -> 191.6 ms
        # (medians of 12 alternating rounds in one process). The same sums in another order (bf16: 1% of
        # the uint8 values differ by one level, fp32: 8e-6 of them)
        decoder = decoder.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    return decoder
