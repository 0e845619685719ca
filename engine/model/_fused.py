"""The elementwise-heavy halves of a transformer block as pure functions of tensors.

Pure functions (parameters passed in, no module state) so that one `torch.compile` of each serves
all blocks of a model (identical shapes, no per-instance guards), fusing norms, modulation, RoPE,
casts and gated residuals into a few kernels. Self-attention over the KV context stays outside
(a gather and an attention kernel). Eager and compiled versions compute the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.nn.functional as F

from engine.model.kv_fp8 import chunk_mean, to_e4m3
from engine.model.layers import gate, layer_norm, modulate
from engine.rope import apply_rope

__all__ = ["QKV", "BlockKernels", "Fp8Linear", "Fp8Pair", "Fp8Quant", "gelu_tanh_", "linear_gelu_tanh", "merge_chunks",
           "post_attention", "pre_attention", "quantize_rows"]

Fp8Quant = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]  # q scale, k scale, k mean, v scale
QKV = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]  # q, k, v, v's chunk mean (FP8 only)
Fp8Linear = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # e4m3 weight (N, K), its scales (1, N), bias (N,)


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def pre_attention(
    x: torch.Tensor,  # (B, L, dim) fp32
    mod: torch.Tensor,  # (B, frames, 6, dim) fp32: block modulation + per-frame time modulation
    wq: torch.Tensor, bq: torch.Tensor, wk: torch.Tensor, bk: torch.Tensor, wv: torch.Tensor, bv: torch.Tensor,
    gq: torch.Tensor, gk: torch.Tensor,  # RMS norm weights of q and k
    cos: torch.Tensor, sin: torch.Tensor,  # (B, L, 1, head_dim/2)
    heads: int,
    eps: float,
    fp8: Fp8Quant | None = None,  # q scale, k scale, k mean, v scale (KVFp8.quant_args): e4m3 outputs
    qkv_fp8: Fp8Linear | None = None,  # the q, k, v projections as one e4m3 weight (Block.quantize_projections)
) -> QKV:
    """norm1 -> modulate -> q, k, v projections -> RMS norm(q, k) -> RoPE; (B, L, heads, d) each, and
    None. With `fp8`, q, k (centred by the mean key) and v (centred by its own chunk mean, the fourth
    output, (B, heads, d) fp32) come out in e4m3 (engine.model.kv_fp8), quantized in the same kernels
    as RoPE and the projection's output."""
    b, length, _ = x.shape
    frames = mod.shape[1]
    h = modulate(layer_norm(x, eps), mod[:, :, 0], mod[:, :, 1], frames).to(wq.dtype)
    if qkv_fp8 is None:
        q, k, v = F.linear(h, wq, bq), F.linear(h, wk, bk), F.linear(h, wv, bv)
    else:  # one e4m3 GEMM for q, k, v; h's row quantization fuses into the norm kernel
        q, k, v = _scaled_linear(h, *qkv_fp8).chunk(3, dim=-1)
    rope_dtype = None if fp8 is None else torch.float32  # fp32 straight into the e4m3 rounding
    q = apply_rope(_rms(q, gq, eps).view(b, length, heads, -1), cos, sin, rope_dtype)
    k = apply_rope(_rms(k, gk, eps).view(b, length, heads, -1), cos, sin, rope_dtype)
    v = v.reshape(b, length, heads, -1)
    if fp8 is None:
        return q, k, v, None
    q_scale, k_scale, k_mean, v_scale = fp8
    centre = chunk_mean(v)
    return to_e4m3(q, q_scale), to_e4m3(k, k_scale, k_mean), to_e4m3(v, v_scale, centre[:, None]), centre


def post_attention(
    x: torch.Tensor,  # (B, L, dim) fp32
    attn: torch.Tensor,  # (B, L, heads, d) self-attention output
    mod: torch.Tensor,  # (B, frames, 6, dim) fp32
    wo: torch.Tensor, bo: torch.Tensor,
    n3w: torch.Tensor, n3b: torch.Tensor,  # norm3 (affine layer norm)
    cq: torch.Tensor, cqb: torch.Tensor, cgq: torch.Tensor,  # cross-attn q projection and its RMS norm
    ck: torch.Tensor, cv: torch.Tensor,  # cross-attn K and V of the context (B, text_len, heads, d)
    co: torch.Tensor, cob: torch.Tensor,
    f1: torch.Tensor, f1b: torch.Tensor, f2: torch.Tensor, f2b: torch.Tensor,  # FFN
    heads: int,
    eps: float,
    ffn_fp8: Fp8Pair | None = None,  # the FFN weights in e4m3 with row scales (see quantize_rows)
    cross_q_fp8: Fp8Linear | None = None,  # the cross-attention q projection in e4m3
) -> torch.Tensor:
    """o projection + gated residual; norm3 -> cross-attention + residual; norm2 -> modulated FFN +
    gated residual. Returns the new fp32 residual stream. With `ffn_fp8` the FFN's two GEMMs run in
    FP8 (torch._scaled_mm, per-token activation scales, per-channel weight scales); the activation
    quantization is elementwise + a row max, so the compiled version fuses it into the kernel that
    makes the activation (the modulated norm, the GELU)."""
    b, length, dim = x.shape
    frames = mod.shape[1]
    dtype = wo.dtype
    x = x + gate(F.linear(attn.flatten(2), wo, bo), mod[:, :, 2], frames)
    h = F.layer_norm(x, (dim,), n3w.float(), n3b.float(), eps).to(dtype)
    q = F.linear(h, cq, cqb) if cross_q_fp8 is None else _scaled_linear(h, *cross_q_fp8)
    q = _rms(q, cgq, eps).view(b, length, heads, -1)
    cross = F.scaled_dot_product_attention(q.transpose(1, 2), ck.transpose(1, 2), cv.transpose(1, 2))
    x = x + F.linear(cross.transpose(1, 2).flatten(2), co, cob).float()
    h = modulate(layer_norm(x, eps), mod[:, :, 3], mod[:, :, 4], frames).to(dtype)
    y = F.linear(_ffn_hidden(h, f1, f1b), f2, f2b) if ffn_fp8 is None else _ffn_fp8(h, ffn_fp8, f1b, f2b)
    return x + gate(y, mod[:, :, 5], frames)


Fp8Pair = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]  # w1, w1 scale, w2, w2 scale


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (M, K) -> e4m3 values and fp32 scales (M, 1), one per row: x ~= values * scales."""
    scale = x.float().abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / torch.finfo(torch.float8_e4m3fn).max
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


def _scaled_linear(x: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor
                   ) -> torch.Tensor:
    """x (..., K) in bf16 times an e4m3 weight (N, K) with scales (1, N), plus bias, in bf16."""
    flat = x.reshape(-1, x.shape[-1])
    values, scale = quantize_rows(flat)
    out = torch._scaled_mm(values, weight.t(), scale_a=scale, scale_b=weight_scale, bias=bias,
                           out_dtype=bias.dtype)
    return out.view(*x.shape[:-1], weight.shape[0])


def _ffn_fp8(h: torch.Tensor, weights: Fp8Pair, b1: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    w1, s1, w2, s2 = weights
    hidden = F.gelu(_scaled_linear(h, w1, s1, b1), approximate="tanh")
    return _scaled_linear(hidden, w2, s2, b2)


@torch.library.custom_op("sessiond::linear_gelu_tanh", mutates_args=())
def linear_gelu_tanh(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """gelu_tanh(x @ weight.T + bias) for x (..., in). On CUDA one cuBLASLt GEMM with the GELU in
    its epilogue (the FFN's hidden activation is never written and read back: a separate GELU
    kernel cost ~2.6 ms per wan-1.3b pass on the H200); an opaque op, so torch.compile keeps it
    whole. Elsewhere the plain expression."""
    if x.device.type != "cuda":  # the CPU's _addmm_activation applies the exact (erf) GELU
        hidden = F.linear(x, weight, bias)
        return gelu_tanh_(hidden) if hidden.dtype == torch.float32 else F.gelu(hidden, approximate="tanh")
    flat = torch._addmm_activation(bias, x.reshape(-1, x.shape[-1]), weight.t(), use_gelu=True)
    return flat.view(*x.shape[:-1], weight.shape[0])


# gelu_tanh(x) = x/2 (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
_GELU_2U_LINEAR = 2.0 * math.sqrt(2.0 / math.pi)
_GELU_2U_CUBIC = _GELU_2U_LINEAR * 0.044715


def gelu_tanh_(x: torch.Tensor) -> torch.Tensor:
    """GELU (tanh form) of ``x`` in place, as x * sigmoid(2u): the same function as
    ``F.gelu(x, approximate="tanh")`` (fp32: within 2e-6 of it), in four in-place elementwise passes
    where the CPU's tanh GELU kernel costs twice as much (256 x 768 fp32 on one AVX2 core: 0.32
    against 0.72 ms; 6 of them a DiT pass of the demo model). For fp32: in bf16 each in-place pass
    rounds, up to 1.3x the tanh kernel's error, so bf16 keeps the kernel. ``x`` must be a fresh tensor
    nobody else holds (an inference-only path: no autograd through in-place ops)."""
    u = x * x
    u.mul_(_GELU_2U_CUBIC).add_(_GELU_2U_LINEAR).mul_(x).sigmoid_()
    return x.mul_(u)


@linear_gelu_tanh.register_fake
def _linear_gelu_tanh_shape(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return x.new_empty(*x.shape[:-1], weight.shape[0])


def _ffn_hidden(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The FFN's GELU(tanh) hidden layer: the one-GEMM op for inference, the plain expression when
    gradients are recorded (training: the op has no backward), on a CPU in fp32 the op's own formula
    out of place, so that a model and its frozen copy (a distill teacher) compute the same numbers."""
    if torch.is_grad_enabled():
        hidden = F.linear(h, weight, bias)
        if hidden.device.type == "cpu" and hidden.dtype == torch.float32:  # bit for bit the op's CPU path
            return hidden * ((hidden * hidden * _GELU_2U_CUBIC + _GELU_2U_LINEAR) * hidden).sigmoid()
        return F.gelu(hidden, approximate="tanh")
    return linear_gelu_tanh(h, weight, bias)


def merge_chunks(out: torch.Tensor, lse: torch.Tensor, means: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Attention over C chunks of keys done as one call per chunk, merged: out (B, C, T, heads, d)
    each call's output over values centred by their chunk's mean; lse (B, C, heads, T) each call's
    softmax log-sum-exp (natural log); means (B, C, heads, d) -> (B, T, heads, d) in `dtype`. Chunk
    c's share of the softmax mass of a query row is exp(lse_c - logsumexp over c of lse_c): exact,
    whatever each chunk's mean (engine.model.kv_fp8)."""
    share = torch.softmax(lse.float(), dim=1).transpose(2, 3).unsqueeze(-1)  # (B, C, T, heads, 1)
    return (share * (out.float() + means.float().unsqueeze(2))).sum(dim=1).to(dtype)


T = TypeVar("T")
PreFn = Callable[..., QKV]
PostFn = Callable[..., torch.Tensor]
MergeFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.dtype], torch.Tensor]


@dataclass
class BlockKernels:
    """The two block halves a model runs, and FP8 attention's merge of its per-chunk calls: plain
    (eager) or compiled."""

    pre: PreFn = pre_attention
    post: PostFn = post_attention
    merge: MergeFn = merge_chunks
    compiled: bool = False

    @classmethod
    def compiled_versions(cls, backend: str | Callable[..., object] = "inductor") -> BlockKernels:
        """torch.compile'd halves (compiled lazily on first call: run warmup before serving)."""
        return cls(
            pre=_without_view_bases(torch.compile(pre_attention, backend=backend), _PRE_ACTIVATIONS),
            post=_without_view_bases(torch.compile(post_attention, backend=backend), _POST_ACTIVATIONS),
            merge=_without_view_bases(torch.compile(merge_chunks, backend=backend), (0, 1, 2)),
            compiled=True,
        )


# positions of the arguments that are activations (x, mod, cos, sin / x, attn, mod, ck, cv), not weights
_PRE_ACTIVATIONS = (0, 1, 10, 11)
_POST_ACTIVATIONS = (0, 1, 2, 10, 11)


def _without_view_bases(fn: Callable[..., T], positions: tuple[int, ...]) -> Callable[..., T]:
    """Call `fn` with the activation arguments at `positions` that are views passed as base-free
    aliases (detach: no copy; the weights are never views).

    torch.compile guards on a view input's base (`x._base.size()`), so an argument that is a view
    in one call and not in the next recompiles the function: a batch of sessions at different
    context lengths hands the post-attention half a buffer, a uniform batch the attention kernel's
    transposed view (a 1.2 s step on the H200, the first time sessions at different context lengths
    were batched). Inference only: with gradients recorded the arguments pass unchanged."""

    def call(*args: object, **kwargs: object) -> T:
        if torch.is_grad_enabled():
            return fn(*args, **kwargs)
        passed = list(args)
        for i in positions:
            arg = passed[i]
            if isinstance(arg, torch.Tensor) and arg._base is not None:
                passed[i] = arg.detach()
        return fn(*passed, **kwargs)

    return call
