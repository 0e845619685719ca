"""Choosing how the Wan VAE decoder runs its convolutions, by measurement.

Activation layout (NCDHW or channels-last) and, on CUDA, whether cuDNN benchmarks its conv
algorithms and whether each norm + SiLU runs as one Triton kernel (channels-last only): which is
fastest depends on the GPU, the library version and the shapes, so it is timed, not assumed: a
first-chunk and a steady-chunk decode of one session per candidate, after an untimed run of each
(allocations, algorithm search, compilation).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from engine._timing import median_seconds
from engine.decoders._wan_causal import CausalConv3d, conv3d_as_taps
from engine.decoders.wan_vae_config import WanVAEConfig

__all__ = ["BENCHMARK_SUFFIX", "FUSED_SUFFIX", "LAYOUTS", "Candidate", "TunableDecoder", "candidates",
           "choose_conv_forms", "cudnn_benchmark", "memory_format", "parse_candidate", "time_layouts"]

LAYOUTS = ("ncdhw", "channels_last")
BENCHMARK_SUFFIX = "+cudnn_benchmark"
FUSED_SUFFIX = "+fused"


class TunableDecoder(Protocol):
    """What the measurements need of the Wan VAE decoder (engine.decoders.wan_vae.WanVAEDecoder)."""

    config: WanVAEConfig
    conv2: CausalConv3d
    layout: str

    def decode(self, latents: torch.Tensor, caches: list[Any]) -> tuple[torch.Tensor, list[Any]]: ...

    def set_layout(self, layout: str, cudnn_benchmark: bool = False, fused: bool = False) -> None: ...

    def fused_available(self) -> bool: ...

    def modules(self) -> Iterator[nn.Module]: ...


@dataclass(frozen=True)
class Candidate:
    """One way to run the decoder: activation layout, cuDNN benchmarking, fused norm + SiLU."""

    layout: str
    benchmark: bool = False
    fused: bool = False

    @property
    def name(self) -> str:
        return self.layout + (BENCHMARK_SUFFIX if self.benchmark else "") + (FUSED_SUFFIX if self.fused else "")


def parse_candidate(name: str) -> Candidate:
    """The inverse of ``Candidate.name`` ("ncdhw", "channels_last+cudnn_benchmark+fused", ...)."""
    fused = name.endswith(FUSED_SUFFIX)
    name = name.removesuffix(FUSED_SUFFIX)
    benchmark = name.endswith(BENCHMARK_SUFFIX)
    return Candidate(name.removesuffix(BENCHMARK_SUFFIX), benchmark, fused)


def candidates(cuda: bool, fused: bool) -> list[Candidate]:
    """Each layout; on CUDA each with and without cuDNN benchmarking; where the one-pass norm +
    SiLU kernel runs (fused), channels-last with it, with and without benchmarking."""
    if not cuda:
        return [Candidate(layout) for layout in LAYOUTS]
    plain = [Candidate(layout, benchmark) for layout in LAYOUTS for benchmark in (False, True)]
    return plain + ([Candidate("channels_last", benchmark, True) for benchmark in (False, True)] if fused else [])


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


def _decode_pair(decoder: TunableDecoder, latents: torch.Tensor) -> float:
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


def time_layouts(decoder: TunableDecoder, latent_frames: int, height: int, width: int) -> dict[str, float]:
    """Seconds per candidate for a first + steady decode at this latent size; leaves the decoder
    on the fastest. Candidates: each layout; on CUDA also with cuDNN benchmarking, and with the
    one-pass norm + SiLU kernel where Triton runs."""
    device = decoder.conv2.weight.device
    latents = torch.zeros(1, decoder.config.z_channels, latent_frames, height, width, device=device)
    timings: dict[str, float] = {}
    for candidate in candidates(device.type == "cuda", decoder.fused_available()):
        decoder.set_layout(candidate.layout, cudnn_benchmark=candidate.benchmark, fused=candidate.fused)
        _decode_pair(decoder, latents)
        timings[candidate.name] = _decode_pair(decoder, latents)
    best = parse_candidate(min(timings, key=lambda name: timings[name]))
    decoder.set_layout(best.layout, cudnn_benchmark=best.benchmark, fused=best.fused)
    return timings


def choose_conv_forms(decoder: TunableDecoder, latent_frames: int, height: int, width: int) -> dict[str, dict[str, float]]:
    """For a channels-last decoder: time every distinct causal conv (steady-chunk input shape,
    weight shape) as one 3-D conv and as 2-D convs summed over its time taps (conv3d_as_taps), and
    set each conv to the faster. Returns seconds per shape and form."""
    device, dtype = decoder.conv2.weight.device, decoder.conv2.weight.dtype
    convs = [m for m in decoder.modules() if isinstance(m, CausalConv3d) and m.context > 0]
    for conv in convs:
        conv.taps2d, conv.last_input_shape = False, None
    if decoder.layout != "channels_last":
        return {}
    latents = torch.zeros(1, decoder.config.z_channels, latent_frames, height, width, device=device)
    _decode_pair(decoder, latents)  # the steady decode runs last: each conv keeps its input shape
    groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[CausalConv3d]] = {}
    for conv in convs:
        if conv.last_input_shape is not None:
            groups.setdefault((conv.last_input_shape, tuple(conv.weight.shape)), []).append(conv)
    timings: dict[str, dict[str, float]] = {}
    with torch.no_grad():
        for (shape, weight_shape), members in groups.items():
            x = torch.randn(shape, device=device, dtype=dtype).contiguous(memory_format=torch.channels_last_3d)
            conv = members[0]
            plain = median_seconds(lambda: F.conv3d(x, conv.weight, None, padding=conv.padding), device)  # noqa: B023
            taps = median_seconds(lambda: conv3d_as_taps(x, conv.weight, None, conv.spatial_padding), device)  # noqa: B023
            for member in members:
                member.taps2d = taps < plain
            timings[f"{list(shape)} x {list(weight_shape)}"] = {"conv3d": plain, "taps2d": taps}
    return timings
