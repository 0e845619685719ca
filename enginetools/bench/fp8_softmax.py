"""Where FP8 attention loses accuracy inside the kernel: the softmax weights P rounded to e4m3.

FlashAttention-3's FP8 forward computes P = exp2((s - rowmax) * log2(e) + offset) in fp32, keeps its
row sum in fp32, and rounds P to e4m3 for the P @ V product (an offset of 8 bits puts the row's
largest weight at 256, using e4m3's range up to 448). e4m3 has 3 mantissa bits and its smallest
subnormal is 2^-9, its smallest normal 2^-6: a weight below 2^-10 after the offset becomes 0, one
between 2^-9 and 2^-6 keeps 1-3 bits. Where a row's softmax mass lies mostly in many small
weights far below its peak, the numerator loses that mass while the fp32 denominator keeps it.

This module emulates that rounding exactly (fp32 elsewhere) and measures how much of each row's
mass lies in those bands, so a benchmark can compare the kernel's error on the model's own q, k, v
with the emulation's: equal errors name the rounding of P as the cause. Tensors are (B, L, heads, d)
as the engine's attention takes them; the work runs one (sample, head) at a time in blocks of rows.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

__all__ = ["E4M3_MIN_NORMAL", "E4M3_MIN_SUBNORMAL", "SoftmaxMass", "attention_p_rounded", "softmax_mass"]

E4M3_MIN_SUBNORMAL = 2.0 ** -9
E4M3_MIN_NORMAL = 2.0 ** -6
_ROWS = 1024


def _blocks(q: torch.Tensor, k: torch.Tensor) -> Iterator[tuple[int, int, slice, torch.Tensor]]:
    """(sample, head, row slice, logits of those rows against all keys, fp32, already scaled)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    for b in range(q.shape[0]):
        for h in range(q.shape[2]):
            keys = k[b, :, h].float()
            for start in range(0, q.shape[1], _ROWS):
                rows = slice(start, min(start + _ROWS, q.shape[1]))
                yield b, h, rows, (q[b, rows, h].float() @ keys.T) * scale


def _weights(logits: torch.Tensor, offset_bits: int) -> torch.Tensor:
    """The kernel's P before rounding: exp2 of (s - rowmax) in base 2, plus the offset."""
    shifted = (logits - logits.amax(dim=-1, keepdim=True)) * math.log2(math.e)
    return torch.exp2(shifted + offset_bits)


def attention_p_rounded(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offset_bits: int = 8,
                        key_blocks: int = 1) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v with P rounded to e4m3 in the numerator only (the row sum stays
    fp32), as the FP8 kernel does; fp32 out, the layout of q. `key_blocks` > 1 emulates attending
    each contiguous block of keys in its own call (P relative to that block's own maximum) and
    merging the calls exactly by their log-sum-exp."""
    out = torch.empty((*q.shape[:-1], v.shape[-1]), dtype=torch.float32, device=q.device)
    bounds = [round(i * k.shape[1] / key_blocks) for i in range(key_blocks + 1)]
    for b, h, rows, logits in _blocks(q, k):
        values = v[b, :, h].float()
        top = logits.amax(dim=-1, keepdim=True)
        numerator = torch.zeros(logits.shape[0], values.shape[-1], device=q.device)
        denominator = torch.zeros(logits.shape[0], 1, device=q.device)
        for lo, hi in itertools.pairwise(bounds):
            part = logits[:, lo:hi]
            p = _weights(part, offset_bits)
            weight = torch.exp(part.amax(dim=-1, keepdim=True) - top)  # the merge, exact in fp32
            numerator += weight * (p.to(torch.float8_e4m3fn).float() @ values[lo:hi])
            denominator += weight * p.sum(dim=-1, keepdim=True)
        out[b, rows, h] = numerator / denominator
    return out


@dataclass(frozen=True)
class SoftmaxMass:
    """Shares of a row's softmax mass by what e4m3 makes of its weights, over all rows and heads."""

    offset_bits: int
    flushed_median: float  # mass in weights that round to 0 (below half the smallest subnormal)
    flushed_p95: float
    subnormal_median: float  # mass in weights kept as subnormals (1-3 bits of precision)
    subnormal_p95: float
    peak_gap_median: float  # natural-log gap between a row's largest logit and its log-sum-exp of the rest

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def softmax_mass(q: torch.Tensor, k: torch.Tensor, offset_bits: int = 8) -> SoftmaxMass:
    """How much of each row's softmax mass sits in weights that e4m3 flushes or keeps as subnormals."""
    flushed: list[torch.Tensor] = []
    subnormal: list[torch.Tensor] = []
    gaps: list[torch.Tensor] = []
    for _b, _h, _rows, logits in _blocks(q, k):
        p = _weights(logits, offset_bits)
        total = p.sum(dim=-1)
        flushed.append((p * (p < E4M3_MIN_SUBNORMAL / 2)).sum(dim=-1) / total)
        subnormal.append((p * ((p >= E4M3_MIN_SUBNORMAL / 2) & (p < E4M3_MIN_NORMAL))).sum(dim=-1) / total)
        top = logits.amax(dim=-1, keepdim=True)
        rest = torch.where(logits == top, torch.full_like(logits, -math.inf), logits)
        gaps.append(top.squeeze(-1) - torch.logsumexp(rest, dim=-1))
    f, s, g = (torch.cat(x).double().cpu() for x in (flushed, subnormal, gaps))
    return SoftmaxMass(offset_bits, float(f.median()), float(f.quantile(0.95)), float(s.median()),
                       float(s.quantile(0.95)), float(g.median()))
