"""FP8 (e4m3) self-attention for Hopper as two Triton kernels: quantize K and V, then attend.

Scaling (per block, per head, so one outlier token or channel costs precision only in its block):
- Q: one scale per (sample, head, BLOCK_M queries), computed and applied inside the attention
  kernel when the block is loaded (each query block is read once);
- K: one scale per (sample, head, BLOCK_N keys), after subtracting the head's mean key over the
  sequence ("smoothing": q.(k - mean) differs from q.k by a constant per query, which softmax
  cancels, and the centred keys use the e4m3 range better);
- V: one scale per (sample, head, BLOCK_N keys, channel), stored transposed (head_dim, keys) as
  Hopper's FP8 matrix instructions want the reduction dim contiguous;
- P (the softmax numerators, in [0, 1]) is multiplied by 448 (e4m3's largest value) before its
  cast, so weights down to ~4e-6 stay representable; its row sums are taken in fp32.
QK^T and PV run on FP8 tensor cores with fp32 accumulation; the online softmax is fp32 in base 2.
`pv_fp8=False` keeps PV in bf16 (reads V as it is), halving the FP8 share of the FLOPs.

Layout as every backend of `engine.attention`: q (B, Lq, heads, d), k and v (B, Lk, heads, d);
output (B, Lq, heads, d) in q's dtype. No mask (the engine's chunk attention needs none).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch

__all__ = ["FP8_MAX", "Fp8AttentionConfig", "fp8_attention", "fp8_attention_usable", "reference_fp8_attention"]

FP8_MAX = 448.0  # largest finite float8_e4m3fn
_LOG2E = 1.4426950408889634

try:  # Triton ships with CUDA builds of torch; CPU-only installs may have none
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the install
    triton = None

# Triton picks its CPU interpreter when a kernel is decorated (this module's import)
_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


@dataclass(frozen=True)
class Fp8AttentionConfig:
    """Tile sizes and launch parameters (chosen on the H200 by `engine.probe_fp8`)."""

    block_m: int = 128
    block_n: int = 128
    num_warps: int = 8
    num_stages: int = 3
    pv_fp8: bool = True
    smooth_k: bool = True


def fp8_attention_usable(q: torch.Tensor) -> bool:
    """True when the kernels can run on q: Triton imports and q is on CUDA (compute capability
    >= 8.9, for e4m3 tensor cores), or Triton runs in its CPU interpreter (tests)."""
    if triton is None or q.dim() != 4 or q.shape[-1] not in (16, 32, 64, 128):
        return False
    if _INTERPRETED:
        return True
    return q.is_cuda and torch.cuda.get_device_capability(q.device) >= (8, 9)


if triton is not None:

    @triton.jit
    def _quant_kv_kernel(  # type: ignore[no-untyped-def]
        k_ptr, v_ptr, mean_ptr, k8_ptr, v8_ptr, k_scale_ptr, v_scale_ptr,
        keys, keys_padded, heads, blocks,
        stride_kb, stride_kl, stride_kh, stride_vb, stride_vl, stride_vh,
        BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, HAS_MEAN: tl.constexpr, V_FP8: tl.constexpr,
    ):
        block = tl.program_id(0)
        bh = tl.program_id(1).to(tl.int64)
        b = bh // heads
        h = bh % heads
        offs_n = block * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        inside = offs_n[:, None] < keys
        k = tl.load(k_ptr + b * stride_kb + h * stride_kh + offs_n[:, None] * stride_kl + offs_d[None, :],
                    mask=inside, other=0.0).to(tl.float32)
        if HAS_MEAN:
            k = tl.where(inside, k - tl.load(mean_ptr + bh * HEAD_DIM + offs_d)[None, :], 0.0)
        k_scale = tl.maximum(tl.max(tl.max(tl.abs(k), axis=1), axis=0), 1e-12) / 448.0
        k8 = (k / k_scale).to(tl.float8e4nv)
        tl.store(k8_ptr + bh * keys_padded * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :], k8)
        tl.store(k_scale_ptr + bh * blocks + block, k_scale)
        if V_FP8:
            v = tl.load(v_ptr + b * stride_vb + h * stride_vh + offs_n[:, None] * stride_vl + offs_d[None, :],
                        mask=inside, other=0.0).to(tl.float32)
            v_scale = tl.maximum(tl.max(tl.abs(v), axis=0), 1e-12) / 448.0  # per channel
            v8 = (v / v_scale[None, :]).to(tl.float8e4nv)
            # transposed: (head_dim, keys) with the keys contiguous
            tl.store(v8_ptr + bh * HEAD_DIM * keys_padded + offs_d[None, :] * keys_padded + offs_n[:, None], v8)
            tl.store(v_scale_ptr + (bh * blocks + block) * HEAD_DIM + offs_d, v_scale)

    @triton.jit
    def _attend_block(  # type: ignore[no-untyped-def]
        acc, l_i, m_i, q8, q_scale, k_base, v_base, vb_base, k_scale_base, v_scale_base, block, keys,
        keys_padded, stride_vl, qk_scale,
        BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, PV_FP8: tl.constexpr, MASK: tl.constexpr,
    ):
        offs_n = block * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        k_t = tl.load(k_base + offs_n[None, :] * HEAD_DIM + offs_d[:, None])  # (d, BLOCK_N) fp8
        k_scale = tl.load(k_scale_base + block)
        qk = tl.dot(q8, k_t) * (qk_scale * q_scale * k_scale)  # log2 domain
        if MASK:
            qk = tl.where(offs_n[None, :] < keys, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None]
        if PV_FP8:
            v = tl.load(v_base + offs_d[None, :] * keys_padded + offs_n[:, None])  # (BLOCK_N, d) fp8
            v_scale = tl.load(v_scale_base + block * HEAD_DIM + offs_d)
            pv = tl.dot((p * 448.0).to(tl.float8e4nv), v)
            acc += pv * (v_scale * (1.0 / 448.0))[None, :]
        else:
            v = tl.load(vb_base + offs_n[:, None] * stride_vl + offs_d[None, :],
                        mask=offs_n[:, None] < keys, other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc)
        return acc, l_i, m_new

    @triton.jit
    def _fp8_attention_kernel(  # type: ignore[no-untyped-def]
        q_ptr, k8_ptr, v8_ptr, v_ptr, k_scale_ptr, v_scale_ptr, o_ptr,
        queries, keys, keys_padded, heads, blocks, qk_scale,
        stride_qb, stride_ql, stride_qh, stride_vb, stride_vl, stride_vh, stride_ob, stride_ol, stride_oh,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, PV_FP8: tl.constexpr,
    ):
        start_m = tl.program_id(0)
        bh = tl.program_id(1).to(tl.int64)
        b = bh // heads
        h = bh % heads
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, HEAD_DIM)
        rows = offs_m[:, None] < queries
        q = tl.load(q_ptr + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_ql + offs_d[None, :],
                    mask=rows, other=0.0).to(tl.float32)
        q_scale = tl.maximum(tl.max(tl.max(tl.abs(q), axis=1), axis=0), 1e-12) / 448.0
        q8 = (q / q_scale).to(tl.float8e4nv)
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        k_base = k8_ptr + bh * keys_padded * HEAD_DIM
        v_base = v8_ptr + bh * HEAD_DIM * keys_padded
        vb_base = v_ptr + b * stride_vb + h * stride_vh
        k_scale_base = k_scale_ptr + bh * blocks
        v_scale_base = v_scale_ptr + bh * blocks * HEAD_DIM
        full = keys // BLOCK_N
        for block in range(0, full):
            acc, l_i, m_i = _attend_block(
                acc, l_i, m_i, q8, q_scale, k_base, v_base, vb_base, k_scale_base, v_scale_base, block, keys,
                keys_padded, stride_vl, qk_scale, BLOCK_N, HEAD_DIM, PV_FP8, False,
            )
        if full < blocks:
            acc, l_i, m_i = _attend_block(
                acc, l_i, m_i, q8, q_scale, k_base, v_base, vb_base, k_scale_base, v_scale_base, full, keys,
                keys_padded, stride_vl, qk_scale, BLOCK_N, HEAD_DIM, PV_FP8, True,
            )
        out = acc / l_i[:, None]
        tl.store(o_ptr + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_ol + offs_d[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=rows)


def fp8_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  config: Fp8AttentionConfig | None = None) -> torch.Tensor:
    """Softmax(q k^T / sqrt(d)) v with FP8 matrix products; q (B, Lq, H, d), k and v (B, Lk, H, d),
    each with unit stride on d. Returns (B, Lq, H, d) contiguous, in q's dtype."""
    cfg = config or Fp8AttentionConfig()
    batch, queries, heads, dim = q.shape
    keys = k.shape[1]
    if k.shape != (batch, keys, heads, dim) or v.shape != k.shape:
        raise ValueError(f"fp8_attention: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} disagree")
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        raise ValueError("fp8_attention needs unit stride on the head dim")
    blocks = triton.cdiv(keys, cfg.block_n)
    padded = blocks * cfg.block_n
    device = q.device
    k8 = torch.empty(batch * heads, padded, dim, device=device, dtype=torch.float8_e4m3fn)
    v8 = torch.empty(batch * heads, dim, padded, device=device, dtype=torch.float8_e4m3fn) if cfg.pv_fp8 else k8
    k_scale = torch.empty(batch * heads, blocks, device=device, dtype=torch.float32)
    v_scale = torch.empty(batch * heads, blocks, dim, device=device, dtype=torch.float32) if cfg.pv_fp8 else k_scale
    mean = k.mean(dim=1, dtype=torch.float32).reshape(batch * heads, dim) if cfg.smooth_k else k_scale
    _quant_kv_kernel[(blocks, batch * heads)](
        k, v, mean, k8, v8, k_scale, v_scale, keys, padded, heads, blocks,
        k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
        BLOCK_N=cfg.block_n, HEAD_DIM=dim, HAS_MEAN=cfg.smooth_k, V_FP8=cfg.pv_fp8,
    )
    out = torch.empty(batch, queries, heads, dim, device=device, dtype=q.dtype)
    qk_scale = _LOG2E / math.sqrt(dim)
    _fp8_attention_kernel[(triton.cdiv(queries, cfg.block_m), batch * heads)](
        q, k8, v8, v, k_scale, v_scale, out, queries, keys, padded, heads, blocks, qk_scale,
        q.stride(0), q.stride(1), q.stride(2), v.stride(0), v.stride(1), v.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, HEAD_DIM=dim, PV_FP8=cfg.pv_fp8,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return out


def reference_fp8_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Exact attention in fp64 (the yardstick for the FP8 kernel's error), same layout."""
    qd, kd, vd = (t.double().transpose(1, 2) for t in (q, k, v))
    weights = torch.softmax(qd @ kd.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    return (weights @ vd).transpose(1, 2).to(q.dtype)
