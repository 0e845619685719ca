"""Choosing the Wan VAE decoder's activation layout (NCDHW or channels-last) by measurement.

Which layout the convolution library runs fastest depends on the GPU, the library version and
the shapes, so it is timed, not assumed: one first-chunk and one steady-chunk decode of a
single session per layout, after an untimed run of each.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from engine.decoders.wan_vae import WanVAEDecoder

__all__ = ["LAYOUTS", "memory_format", "time_layouts"]

LAYOUTS = ("ncdhw", "channels_last")


def memory_format(layout: str) -> torch.memory_format:
    return torch.channels_last_3d if layout == "channels_last" else torch.contiguous_format


def _decode_pair(decoder: WanVAEDecoder, latents: torch.Tensor) -> float:
    """Seconds for a first-chunk decode followed by a steady-chunk decode."""
    device = latents.device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    _, caches = decoder.decode(latents, [None])
    decoder.decode(latents, list(caches))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def time_layouts(decoder: WanVAEDecoder, latent_frames: int, height: int, width: int) -> dict[str, float]:
    """Seconds per layout for a first + steady decode at this latent size; leaves the decoder in
    the fastest layout."""
    device = decoder.conv2.weight.device
    latents = torch.zeros(1, decoder.config.z_channels, latent_frames, height, width, device=device)
    timings: dict[str, float] = {}
    for layout in LAYOUTS:
        decoder.set_layout(layout)
        _decode_pair(decoder, latents)  # untimed: allocations, kernel selection
        timings[layout] = _decode_pair(decoder, latents)
    decoder.set_layout(min(timings, key=lambda name: timings[name]))
    return timings
