"""FP8 (e4m3) q, k and v for self-attention and the KV cache: fixed scales per layer and head.

FA3's FP8 kernel takes one dequantization factor per (sample, head) for all of a sample's keys, so
every key a query sees (its own chunk's, made afresh by each denoise pass, and its context's, written
by earlier cache passes) must share one scale and one centring. The scales are therefore fixed per
layer and head for the life of the model: q, k and v are quantized once, where they are made (in the
fused pre-attention kernel, right after RoPE), a cache pass writes the e4m3 bytes into the slab as
they are, and a slab never needs rescaling: offload, restore, rollback and snapshots move or
recompute its bytes unchanged.

- q and k: after the RMS norm over `dim` channels no element exceeds sqrt(dim) * max|g| (g the norm's
  weight over the head's channels; RoPE rotates pairs and keeps their norm), so that bound maps to
  448, e4m3's largest value: nothing saturates. e4m3 is floating point, so its relative precision
  (3 mantissa bits) does not depend on the scale while values stay above its smallest normal number,
  2^-6, i.e. 2^15 below the bound.
- k is centred by a mean key per head (calibrated): q.(k - m) = q.k - q.m is one constant for every
  key of a query, which softmax cancels, and the centred keys are smaller, so the rounding error of
  q.k shrinks with them. The bound grows by max|m|.
- v is centred by the mean of its own chunk (per sample and head, taken where v is made): each
  chunk of keys a query sees -- its own, made afresh by each pass, and each context slab, written by
  a cache pass that stored its chunk's mean beside the e4m3 bytes -- holds values with no common
  offset. Attention then runs one call per chunk of keys (`engine.model.chunk_attention`: one FA3
  launch for all of them), and the calls are merged by their log-sum-exp, each chunk's mean added
  back weighted by that chunk's share of the softmax mass: exact, since each call's softmax weights
  sum to 1. Why: FA3's FP8 kernel summed the values' large common offset (0.47-0.70 of their spread
  at Wan's layers 0/15/28) and its output was 17-22% from exact attention on the very same e4m3
  inputs; with v centred by the call's own mean 0.4-0.7% (H100, results/cost/README.md). One fixed
  mean cannot do it: the offset moves from chunk to chunk and rollout to rollout (on the CPU's tiny
  config a calibrated mean was 0.79 of its norm away from a rollout's own). The rounding of the
  softmax weights to e4m3 was measured not to be the cause (`enginetools.bench.fp8_softmax`).
- v's scale: its largest magnitude per head over calibration passes plus the largest of the cache
  pass's mean (a bound on |v - m| for a chunk mean m of that size), times `V_HEADROOM`; a larger
  value saturates at 448 (`saturated_fraction` counts them in the GPU checks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from engine.attention_fa3 import FP8, Descale

__all__ = ["FP8_MAX", "V_HEADROOM", "KVFp8", "KVFp8Stats", "chunk_mean", "norm_bound_scale", "saturated_fraction",
           "to_e4m3"]

FP8_MAX = 448.0  # largest finite float8_e4m3fn
V_HEADROOM = 16.0  # v's calibrated peak maps to 448 / 16 = 28


def to_e4m3(x: torch.Tensor, scale: torch.Tensor, mean: torch.Tensor | None = None) -> torch.Tensor:
    """x (..., heads, d) -> e4m3 of (x - mean) / scale, saturating at +-448; scale (heads,), mean
    (heads, d) or broadcast to x (a chunk mean per sample: (B, 1, heads, d)), fp32. Elementwise: a compiled caller fuses it into the kernel that makes x."""
    xf = x.float() if mean is None else x.float() - mean
    return (xf / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8)


def chunk_mean(v: torch.Tensor) -> torch.Tensor:
    """v (B, L, heads, d) -> its mean over the chunk's tokens per sample and head, (B, heads, d) fp32:
    the centre of the chunk's e4m3 values (a reduction the compiled pre-attention half fuses)."""
    return v.float().mean(dim=1)


def saturated_fraction(x: torch.Tensor, scale: torch.Tensor, mean: torch.Tensor | None = None) -> float:
    """The share of x's elements that `to_e4m3` saturates (a check, not for the serving path)."""
    xf = x.float() if mean is None else x.float() - mean
    return float(((xf / scale[:, None]).abs() > FP8_MAX).float().mean())


def norm_bound_scale(weight: torch.Tensor, heads: int, extra: torch.Tensor | None = None) -> torch.Tensor:
    """(heads,) scales mapping sqrt(dim) * max|g| over each head's channels (+ `extra`, per head) to
    448: the largest magnitude an RMS-normed, RoPE-rotated element can take."""
    g = weight.detach().float().abs().view(heads, -1).amax(dim=1)
    bound = math.sqrt(weight.numel()) * g
    if extra is not None:
        bound = bound + extra.float()
    return bound.clamp_min(1e-12) / FP8_MAX


@dataclass
class KVFp8Stats:
    """What calibration passes saw of one layer's roped k and its v: per-head sums for the mean key,
    the cache pass's sums for v's mean (its size bounds the chunk means in v's scale), the largest |v|."""

    k_sum: torch.Tensor  # (heads, d) fp64
    tokens: int = 0
    v_peak: torch.Tensor | None = None  # (heads,) fp32
    v_sum: torch.Tensor | None = None  # (heads, d) fp64, cache passes only
    v_tokens: int = 0

    def add(self, k: torch.Tensor, v: torch.Tensor, cache_pass: bool = False) -> None:
        """k, v (B, L, heads, d) of one pass; `cache_pass`: the pass that writes context slabs."""
        self.k_sum += k.double().sum(dim=(0, 1))
        self.tokens += k.shape[0] * k.shape[1]
        peak = v.float().abs().amax(dim=(0, 1, 3))
        self.v_peak = peak if self.v_peak is None else torch.maximum(self.v_peak, peak)
        if cache_pass:
            total = v.double().sum(dim=(0, 1))
            self.v_sum = total if self.v_sum is None else self.v_sum + total
            self.v_tokens += v.shape[0] * v.shape[1]


@dataclass
class KVFp8:
    """One layer's fixed FP8 scales (fp32, on the model's device): x ~= e4m3 * scale (+ k_mean for k,
    + the chunk's own mean for v, which travels with the chunk)."""

    q_scale: torch.Tensor  # (heads,)
    k_scale: torch.Tensor  # (heads,)
    k_mean: torch.Tensor  # (heads, d)
    v_scale: torch.Tensor  # (heads,)
    descale: Descale = field(init=False)

    def __post_init__(self) -> None:
        self.descale = Descale(self.q_scale, self.k_scale, self.v_scale)

    @classmethod
    def from_calibration(cls, norm_q: torch.Tensor, norm_k: torch.Tensor, heads: int, stats: KVFp8Stats) -> KVFp8:
        """Scales from the layer's q and k RMS-norm weights (dim,) and its calibration statistics."""
        if not stats.tokens or stats.v_peak is None or stats.v_sum is None:
            raise ValueError("KVFp8.from_calibration needs at least one calibration pass, a cache pass among them")
        mean = (stats.k_sum / stats.tokens).float()
        k_scale = norm_bound_scale(norm_k, heads, extra=mean.abs().amax(dim=1))
        v_mean = (stats.v_sum / stats.v_tokens).float()
        v_scale = ((stats.v_peak + v_mean.abs().amax(dim=1)) * V_HEADROOM).clamp_min(1e-12) / FP8_MAX
        device = norm_q.device
        return cls(norm_bound_scale(norm_q, heads).to(device), k_scale.to(device), mean.to(device),
                   v_scale.to(device))

    def quant_args(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """What the fused pre-attention kernel takes: q scale, k scale, k mean, v scale."""
        return self.q_scale, self.k_scale, self.k_mean, self.v_scale
