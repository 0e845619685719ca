"""Wan2.1 VAE decoder, streaming chunk by chunk with a functional per-session temporal cache.

Latents (B, 16, T, h, w) are un-normalised (z * std + mean), mixed by ``conv2`` (1x1x1) and run
through the causal decoder trunk: 8x spatial and 4x temporal upsampling. The first chunk of a
stream yields 1 + 4(T-1) frames (its first latent frame maps to one frame), later chunks 4T.
Each causal conv keeps its last two input frames per session (Wan's ``feat_cache``); decoding a
stream chunk by chunk equals decoding it whole. Parameter names and shapes equal the official
``Wan2.1_VAE.pth`` decoder keys (``decoder.*`` and ``conv2.*``), so that file loads strictly.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import torch
from torch import nn

from engine.config import ModelConfig
from engine.decoders._triton_norm_silu import norm_silu_usable
from engine.decoders._wan_causal import CausalConv3d, HistoryCursor
from engine.decoders._wan_decoder3d import Decoder3d
from engine.decoders._wan_layout import (
    LAYOUTS,
    choose_conv_forms,
    cudnn_benchmark,
    memory_format,
    parse_candidate,
    time_layouts,
)
from engine.decoders.wan_vae_config import WanVAEConfig, vae_config_for
from engine.decoders.wan_vae_weights import load_wan_vae_state_dict
from engine.errors import EngineError

__all__ = ["LAYOUTS", "WanVAECache", "WanVAEConfig", "WanVAEDecoder", "build_wan_vae_decoder", "vae_config_for"]


@dataclass(frozen=True)
class WanVAECache:
    """One session's decoder state: the last two input frames of every causal conv.

    Tensors are (C, 2, h, w) on the decoder's device; never mutated once returned. No tensors:
    a session that has decoded nothing yet.
    """

    histories: tuple[torch.Tensor, ...]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.histories)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> WanVAECache:
        """A copy on another device (e.g. pinned host memory for offload)."""
        return WanVAECache(tuple(t.to(device, non_blocking=non_blocking) for t in self.histories))


class WanVAEDecoder(nn.Module):
    """Streaming Wan2.1 VAE decoder, batched over sessions with per-session caches
    (engine.decoders.base.StreamingDecoder)."""

    kind = "wan_vae"
    label = "Wan2.1 VAE decoder (causal 3-D convs, streaming with its temporal feature cache)"

    latent_mean: torch.Tensor  # (1, z, 1, 1, 1) buffer, not in the state dict
    latent_std: torch.Tensor

    def __init__(self, config: WanVAEConfig) -> None:
        super().__init__()
        self.config = config
        self.conv2 = CausalConv3d(config.z_channels, config.z_channels, (1, 1, 1))
        self.decoder = Decoder3d(
            base=config.base_channels,
            z_channels=config.z_channels,
            multipliers=config.channel_multipliers,
            res_blocks=config.res_blocks,
            temporal_upsample=config.temporal_upsample,
        )
        shape = (1, config.z_channels, 1, 1, 1)
        self.register_buffer("latent_mean", torch.tensor(config.latent_mean).view(shape), persistent=False)
        self.register_buffer("latent_std", torch.tensor(config.latent_std).view(shape), persistent=False)
        self.layout = "ncdhw"  # activation layout, see set_layout
        self.cudnn_benchmark = False
        self.fused = False  # norm + SiLU through the one-pass Triton kernel, see set_layout
        self.layout_timings: dict[str, float] = {}
        self.conv_form_timings: dict[str, dict[str, float]] = {}  # see choose_layout

    def set_layout(self, layout: str, cudnn_benchmark: bool = False, fused: bool = False) -> None:
        """Run activations (and 3-D conv weights) in `layout`: "ncdhw" or "channels_last";
        `cudnn_benchmark` lets cuDNN time its conv algorithms during this decoder's calls; `fused`
        runs each norm + SiLU as one Triton kernel writing into the next conv's input buffer
        (channels_last only, where Triton runs: see fused_available)."""
        if layout not in LAYOUTS:
            raise EngineError("bad_vae_layout", f"Wan VAE layout {layout!r} is not one of {list(LAYOUTS)}")
        if fused and not (layout == "channels_last" and self.fused_available()):
            raise EngineError(
                "bad_vae_layout",
                f"the fused norm + SiLU needs the channels_last layout and Triton on a CUDA device "
                f"(asked: layout {layout!r} on {self.conv2.weight.device}); drop '+fused' from the choice",
            )
        fmt = memory_format(layout)
        with torch.no_grad():
            for param in self.parameters():
                if param.dim() == 5:
                    param.data = param.data.contiguous(memory_format=fmt)
        self.layout = layout
        self.cudnn_benchmark = cudnn_benchmark
        self.fused = fused

    def fused_available(self) -> bool:
        """Whether the one-pass norm + SiLU kernel can run on this decoder's device."""
        probe = torch.empty((1, 1, 1, 1, 1), device=self.conv2.weight.device)
        return norm_silu_usable(probe)

    def choose_layout(self, latent_frames: int, latent_height: int, latent_width: int) -> dict[str, float]:
        """Time each layout on a first + steady decode of one session and keep the fastest; on CUDA
        then also each conv's form (one 3-D conv or 2-D convs over its time taps)."""
        self.layout_timings = time_layouts(self, latent_frames, latent_height, latent_width)
        if self.conv2.weight.device.type == "cuda":
            self.conv_form_timings = choose_conv_forms(self, latent_frames, latent_height, latent_width)
        return self.layout_timings

    # the StreamingDecoder protocol ----------------------------------------------------------
    def new_cache(self) -> WanVAECache:
        return WanVAECache(())

    def is_first(self, cache: WanVAECache | None) -> bool:
        return cache is None or not cache.histories

    def cache_to(self, cache: WanVAECache, device: torch.device) -> WanVAECache:
        return cache.to(device)

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        """A full Wan2.1 VAE state dict or its decoder half, loaded strictly (encoder keys ignored)."""
        load_wan_vae_state_dict(self, state)

    @torch.no_grad()
    def init_random(self, seed: int) -> None:
        """Deterministic random weights (no checkpoint): convs ~ N(0, 1/fan_in), zero biases, unit norms."""
        for name, param in self.named_parameters():
            if param.is_meta:  # shapes only (FLOP counting, layout checks)
                continue
            if name.endswith("gamma"):
                param.fill_(1.0)
            elif param.dim() == 1:
                param.zero_()
            else:
                generator = torch.Generator().manual_seed(seed + zlib.crc32(name.encode()))  # same on every device
                fan_in = param[0].numel()
                param.copy_(torch.randn(param.shape, generator=generator) * fan_in**-0.5)

    # geometry ----------------------------------------------------------------------------
    def frames_for(self, latent_frames: int, first: bool) -> int:
        """Video frames decoded from a chunk of `latent_frames` (first chunk of a stream or not)."""
        stride = self.config.temporal_stride
        return 1 + stride * (latent_frames - 1) if first else stride * latent_frames

    def cache_bytes(self, latent_height: int, latent_width: int, dtype: torch.dtype) -> int:
        """Bytes one session's cache holds for latents of this size (exact; on the meta device)."""
        with torch.device("meta"):
            probe_decoder = WanVAEDecoder(self.config).to(dtype)
            probe = torch.empty(1, self.config.z_channels, 1, latent_height, latent_width, dtype=dtype)
            cursor = HistoryCursor([None])
            probe_decoder._trunk(probe, cursor, first=False)
        return sum(t.numel() for t in cursor.results()[0]) * torch.empty((), dtype=dtype).element_size()

    # decoding ----------------------------------------------------------------------------
    def decode(
        self, latents: torch.Tensor, caches: list[WanVAECache | None]
    ) -> tuple[torch.Tensor, list[WanVAECache]]:
        """latents (B, z, T, h, w), one cache (or None: a new stream) per session ->
        (uint8 frames (B, F, 8h, 8w, 3), new caches). Input caches are left untouched.

        All sessions of one call must be at the same point (all new streams or none), since a
        first chunk yields a different number of frames; the caller batches them apart.
        """
        rgb, new_caches = self.decode_rgb(latents, caches)
        return self._to_uint8(rgb), new_caches

    def decode_rgb(
        self, latents: torch.Tensor, caches: list[WanVAECache | None]
    ) -> tuple[torch.Tensor, list[WanVAECache]]:
        """Like `decode`, but returns the unclamped decoder output (B, 3, F, H, W) in the module dtype."""
        self._check(latents, caches)
        first = self.is_first(caches[0])
        cursor = HistoryCursor(
            [c.histories if c is not None and c.histories else None for c in caches],
            memory_format(self.layout),
            self.fused,
        )
        with torch.no_grad(), cudnn_benchmark(self.cudnn_benchmark):
            rgb = self._trunk(latents, cursor, first)
        for cache in caches:
            if cache is not None and cache.histories and len(cache.histories) != cursor.slots_used:
                raise EngineError(
                    "bad_decoder_cache",
                    f"decoder cache holds {len(cache.histories)} conv histories, this decoder uses "
                    f"{cursor.slots_used}: pass the cache this decoder returned (or None for a new stream)",
                )
        return rgb, [WanVAECache(h) for h in cursor.results()]

    def _trunk(self, latents: torch.Tensor, cursor: HistoryCursor, first: bool) -> torch.Tensor:
        """(B, z, T, h, w) normalised latents -> (B, 3, F, H, W) float in the module dtype."""
        weight = self.conv2.weight
        z = (latents.float() * self.latent_std.float() + self.latent_mean.float()).to(weight.dtype)
        z = z.contiguous(memory_format=memory_format(self.layout))
        return self.decoder(self.conv2(z), cursor, first)

    @staticmethod
    @torch.no_grad()
    def _to_uint8(rgb: torch.Tensor) -> torch.Tensor:
        """(B, 3, F, H, W) in [-1, 1] -> (B, F, H, W, 3) uint8, clamped."""
        scaled = (rgb.float().clamp_(-1.0, 1.0) + 1.0) * 127.5
        return scaled.round_().to(torch.uint8).permute(0, 2, 3, 4, 1).contiguous()

    def _check(self, latents: torch.Tensor, caches: list[WanVAECache | None]) -> None:
        z = self.config.z_channels
        if latents.dim() != 5 or latents.shape[1] != z or latents.shape[2] < 1:
            raise EngineError(
                "bad_latents",
                f"Wan VAE decode needs latents (B, {z}, T>=1, h, w); got shape {tuple(latents.shape)}",
            )
        if not latents.is_floating_point():
            raise EngineError("bad_latents", f"latents must be a float tensor, got {latents.dtype}")
        if len(caches) != latents.shape[0]:
            raise EngineError(
                "bad_decoder_batch",
                f"got {len(caches)} caches for a batch of {latents.shape[0]} sessions: pass one per session",
            )
        starts = {self.is_first(c) for c in caches}
        if len(starts) > 1:
            raise EngineError(
                "mixed_decoder_batch",
                "a decode batch mixes new streams (no cache yet) and continuing ones; decode them in "
                "separate calls (a first chunk yields fewer frames)",
            )


def build_wan_vae_decoder(config: ModelConfig, device: torch.device, dtype: torch.dtype) -> WanVAEDecoder:
    """A random-init Wan VAE decoder for `config` on `device` in `dtype` (load weights after)."""
    with torch.device("meta"):
        decoder = WanVAEDecoder(vae_config_for(config))
    decoder = decoder.to_empty(device=device)
    decoder.init_random(seed=0)
    decoder = decoder.to(dtype).eval()
    vae = decoder.config
    shape = (1, vae.z_channels, 1, 1, 1)  # statistics stay float32 whatever the weights' dtype
    decoder.latent_mean = torch.tensor(vae.latent_mean, device=device).view(shape)
    decoder.latent_std = torch.tensor(vae.latent_std, device=device).view(shape)
    layout = config.extra.get("wan_vae_layout", "auto" if device.type == "cuda" else "ncdhw")
    if layout == "auto":
        decoder.choose_layout(config.latent_frames_per_chunk, config.latent_height, config.latent_width)
    else:  # a candidate's name, e.g. "ncdhw" or "channels_last+fused"
        chosen = parse_candidate(str(layout))
        decoder.set_layout(chosen.layout, cudnn_benchmark=chosen.benchmark, fused=chosen.fused)
    return decoder
