"""Choosing how the Wan VAE decoder runs its convolutions, by measurement.

Activation layout (NCDHW or channels-last) and, on CUDA, whether cuDNN benchmarks its conv
algorithms: which is fastest depends on the GPU, the library version and the shapes, so it is
timed, not assumed: a first-chunk and a steady-chunk decode of one session per candidate, after
an untimed run of each (allocations, algorithm search).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from engine.decoders.wan_vae import WanVAEDecoder

__all__ = ["BENCHMARK_SUFFIX", "LAYOUTS", "cudnn_benchmark", "memory_format", "time_layouts"]

LAYOUTS = ("ncdhw", "channels_last")
BENCHMARK_SUFFIX = "+cudnn_benchmark"


def memory_format(layout: str) -> torch.memory_format:
    return torch.channels_last_3d if layout == "channels_last" else torch.contiguous_format


@contextmanager
def cudnn_benchmark(enabled: bool) -> Iterator[None]:
    """cuDNN algorithm benchmarking on or off for the duration of one decode, then as before."""
    previous = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = enabled
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = previous


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
    """Seconds per candidate for a first + steady decode at this latent size; leaves the decoder
    on the fastest. Candidates: each layout, and on CUDA each layout with cuDNN benchmarking."""
    device = decoder.conv2.weight.device
    latents = torch.zeros(1, decoder.config.z_channels, latent_frames, height, width, device=device)
    benchmark_options = (False, True) if device.type == "cuda" else (False,)
    timings: dict[str, float] = {}
    for layout in LAYOUTS:
        for benchmark in benchmark_options:
            decoder.set_layout(layout, cudnn_benchmark=benchmark)
            _decode_pair(decoder, latents)
            timings[layout + (BENCHMARK_SUFFIX if benchmark else "")] = _decode_pair(decoder, latents)
    best = min(timings, key=lambda name: timings[name])
    decoder.set_layout(best.removesuffix(BENCHMARK_SUFFIX), cudnn_benchmark=best.endswith(BENCHMARK_SUFFIX))
    return timings
