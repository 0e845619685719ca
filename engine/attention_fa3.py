"""FlashAttention-3 forward kernels (Hopper) for self-attention, in bf16 or FP8, and the exact
reference that takes the same arguments where they are missing.

The kernels come from the optional package `fa3-fwd` (the `gpu` extra: `pip install 'sessiond[gpu]'`),
imported only when a backend asks for them. Two call shapes:
- uniform: q (B, Lq, heads, d), k and v (B, Lk, heads, d), every sample with the same key length;
- packed: the samples' queries and keys concatenated along the sequence, q (sum Lq, heads, d), k and v
  (sum Lk, heads, d), with `Packing` saying where each sample starts (FA3's variable-length
  interface: sessions at different context lengths in one call, no padding, no mask).
FP8: q, k, v in e4m3 and one dequantization factor per head for each (`Descale`: x ~= x8 * scale);
FA3 takes one per (sample, head), so the per-head vectors are broadcast over the samples. Output in
bf16 (in q's dtype when q is not FP8).

`reference_attention` computes the same thing exactly (fp32 softmax over the dequantized inputs,
one sample at a time): the CPU's FP8 path, and the yardstick of the GPU checks.
"""

from __future__ import annotations

import importlib
import logging
import math
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["FA3_INSTALL_HINT", "FP8", "Descale", "Packing", "PackingCache", "fa3_attention", "fa3_attention_lse",
           "fa3_module", "reference_attention", "reference_attention_lse"]

logger = logging.getLogger(__name__)

FP8 = torch.float8_e4m3fn
FA3_INSTALL_HINT = ("FlashAttention-3 comes from the package fa3-fwd (the `gpu` extra: pip install "
                    "'sessiond[gpu]'; it needs a Hopper GPU and a CUDA build of torch)")


def fa3_module() -> ModuleType | None:
    """The FA3 interface module, or None when the package is missing or its kernels do not load."""
    try:
        return importlib.import_module("fa3_fwd_interface")
    except (ImportError, OSError, RuntimeError) as exc:  # missing, or built for another torch / CUDA
        logger.debug("fa3_fwd_interface does not import: %s", exc)
        return None


@dataclass
class Descale:
    """Dequantization factors of e4m3 q, k and v, one per head (fp32 (heads,) each): x ~= x8 * scale.
    `rows(n)` gives them as FA3 takes them, (n, heads) each, built once per n."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    _rows: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = field(default_factory=dict, repr=False)

    def rows(self, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if n not in self._rows:
            self._rows[n] = tuple(s.float().expand(n, -1).contiguous() for s in (self.q, self.k, self.v))  # type: ignore[assignment]
        return self._rows[n]


@dataclass(frozen=True)
class Packing:
    """Where each sample's queries and keys start in a packed call: prefix sums of the lengths,
    on the device as int32 (FA3's cu_seqlens)."""

    q_lens: tuple[int, ...]
    k_lens: tuple[int, ...]
    cu_q: torch.Tensor  # (samples + 1,) int32
    cu_k: torch.Tensor

    @property
    def samples(self) -> int:
        return len(self.q_lens)

    @property
    def max_q(self) -> int:
        return max(self.q_lens)

    @property
    def max_k(self) -> int:
        return max(self.k_lens)


def _prefix(lengths: tuple[int, ...]) -> list[int]:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


@dataclass
class PackingCache:
    """One `Packing` per distinct (query lengths, key lengths): its prefix sums go to the device
    once, not on every call (no host-to-device copy in the per-pass path)."""

    device: torch.device
    _cache: dict[tuple[tuple[int, ...], tuple[int, ...]], Packing] = field(default_factory=dict)

    def get(self, q_lens: list[int] | tuple[int, ...], k_lens: list[int] | tuple[int, ...]) -> Packing:
        key = (tuple(q_lens), tuple(k_lens))
        if len(key[0]) != len(key[1]) or not key[0]:
            raise ValueError(f"packing needs one query and one key length per sample, got {key}")
        packing = self._cache.get(key)
        if packing is None:
            cu_q, cu_k = (torch.tensor(_prefix(lens), dtype=torch.int32, device=self.device) for lens in key)
            packing = self._cache[key] = Packing(key[0], key[1], cu_q, cu_k)
        return packing


def _unit_stride(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


def fa3_attention(module: ModuleType, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  descale: Descale | None = None, packing: Packing | None = None) -> torch.Tensor:
    """FA3 over a uniform batch (packing None) or packed samples; FP8 when q is e4m3 (then
    `descale` is required). Returns q's layout, bf16 for FP8 inputs.

    Calls the kernels' registered op (`torch.ops.fa3_fwd.fwd`) directly when the module exposes it:
    the interface's autograd Function and custom-op wrappers cost host time on every call, and at
    b=1 on the H200 the host, not the GPU, set the pace of an eager pass (the profile of
    results/cost/: 19-23% of a denoise step idle, mostly waiting for the FA3 launch)."""
    if (q.dtype == FP8) != (descale is not None):
        raise ValueError("fa3_attention: FP8 inputs need a Descale and bf16 inputs take none")
    samples = q.shape[0] if packing is None else packing.samples
    scales = descale.rows(samples) if descale is not None else (None, None, None)
    op = getattr(getattr(module, "fa3_fwd_cuda", None), "fwd", None)
    if op is not None:
        return _op_call(op, q, k, v, scales, packing)[0]  # type: ignore[no-any-return]
    if packing is None:
        return module.flash_attn_func(  # type: ignore[no-any-return]
            q, k, v, q_descale=scales[0], k_descale=scales[1], v_descale=scales[2])
    return module.flash_attn_varlen_func(  # type: ignore[no-any-return]
        q, k, v, packing.cu_q, packing.cu_k, packing.max_q, packing.max_k,
        q_descale=scales[0], k_descale=scales[1], v_descale=scales[2])


def _op_call(op: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             scales: tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None],
             packing: Packing | None) -> tuple[Any, ...]:
    """The registered op's whole answer: (out, softmax log-sum-exp (B, heads, Lq) fp32, ...)."""
    cu_q, cu_k, max_q, max_k = (None, None, None, None) if packing is None else (
        packing.cu_q, packing.cu_k, packing.max_q, packing.max_k)
    # the interface's argument order: q k v k_new v_new qv out cu_q cu_k cu_k_new seqused_q seqused_k
    # max_q max_k page_table kv_batch_idx leftpad_k rotary_cos rotary_sin seqlens_rotary q/k/v_descale
    # softmax_scale causal window_left window_right attention_chunk softcap rotary_interleaved
    # scheduler_metadata num_splits pack_gqa sm_margin
    return tuple(op(_unit_stride(q), _unit_stride(k), _unit_stride(v), None, None, None, None, cu_q, cu_k, None,
                    None, None, max_q, max_k, None, None, None, None, None, None, *scales, q.shape[-1] ** -0.5,
                    False, -1, -1, 0, 0.0, True, None, 1, None, 0))


def fa3_attention_lse(module: ModuleType, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      descale: Descale | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`fa3_attention` over a uniform batch, with the softmax log-sum-exp of each query row (natural
    log, (B, heads, Lq) fp32), for merging calls over parts of the keys. Needs the registered op."""
    op = getattr(getattr(module, "fa3_fwd_cuda", None), "fwd", None)
    if op is None:
        raise RuntimeError("fa3_attention_lse needs fa3-fwd's registered op (fa3_fwd_cuda.fwd)")
    scales = descale.rows(q.shape[0]) if descale is not None else (None, None, None)
    answer = _op_call(op, q, k, v, scales, None)
    return answer[0], answer[1]


def reference_attention_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, descale: Descale | None = None
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """What `fa3_attention_lse` computes, in fp32 on the dequantized inputs (a uniform batch)."""
    qs, ks, vs = (None, None, None) if descale is None else (descale.q, descale.k, descale.v)
    qf, kf, vf = (_dequantize(x, s).transpose(1, 2) for x, s in ((q, qs), (k, ks), (v, vs)))
    scores = (qf @ kf.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (B, heads, Lq, Lk)
    lse = torch.logsumexp(scores, dim=-1)
    out = (torch.softmax(scores, dim=-1) @ vf).transpose(1, 2).contiguous()
    return out.to(torch.bfloat16 if q.dtype == FP8 else q.dtype), lse


def _dequantize(x: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    """(..., heads, d) -> fp32, times the per-head scale when given."""
    return x.float() if scale is None else x.float() * scale.float()[:, None]


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, descale: Descale | None = None,
                        packing: Packing | None = None) -> torch.Tensor:
    """Exactly what `fa3_attention` computes, in fp32 on the dequantized inputs, one sample at a time:
    softmax(q k^T / sqrt(d)) v. Same arguments and output layout (bf16 for FP8 inputs)."""
    out_dtype = torch.bfloat16 if q.dtype == FP8 else q.dtype
    qs, ks, vs = (None, None, None) if descale is None else (descale.q, descale.k, descale.v)
    qf, kf, vf = _dequantize(q, qs), _dequantize(k, ks), _dequantize(v, vs)
    scale = 1.0 / math.sqrt(q.shape[-1])
    if packing is None:
        out = F.scaled_dot_product_attention(qf.transpose(1, 2), kf.transpose(1, 2), vf.transpose(1, 2), scale=scale)
        return out.transpose(1, 2).contiguous().to(out_dtype)
    if q.shape[0] != sum(packing.q_lens) or k.shape[0] != sum(packing.k_lens):
        raise ValueError(f"packed q {tuple(q.shape)} / k {tuple(k.shape)} do not match {packing.q_lens} / {packing.k_lens}")
    out = torch.empty(q.shape, dtype=out_dtype, device=q.device)
    bounds_q, bounds_k = _prefix(packing.q_lens), _prefix(packing.k_lens)
    for i in range(packing.samples):
        rows = slice(bounds_q[i], bounds_q[i + 1])
        keys = slice(bounds_k[i], bounds_k[i + 1])
        one = F.scaled_dot_product_attention(qf[rows].transpose(0, 1), kf[keys].transpose(0, 1),
                                             vf[keys].transpose(0, 1), scale=scale)
        out[rows] = one.transpose(0, 1).to(out_dtype)
    return out
