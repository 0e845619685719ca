"""The elementwise-heavy halves of a transformer block as pure functions of tensors.

Pure functions (parameters passed in, no module state) so that one `torch.compile` of each serves
all blocks of a model (identical shapes, no per-instance guards), fusing norms, modulation, RoPE,
casts and gated residuals into a few kernels. Self-attention over the KV context stays outside
(a gather and an attention kernel). Eager and compiled versions compute the same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.model.layers import gate, layer_norm, modulate
from engine.rope import apply_rope

__all__ = ["BlockKernels", "post_attention", "pre_attention"]


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
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """norm1 -> modulate -> q, k, v projections -> RMS norm(q, k) -> RoPE; (B, L, heads, d) each."""
    b, length, _ = x.shape
    frames = mod.shape[1]
    h = modulate(layer_norm(x, eps), mod[:, :, 0], mod[:, :, 1], frames).to(wq.dtype)
    q = apply_rope(_rms(F.linear(h, wq, bq), gq, eps).view(b, length, heads, -1), cos, sin)
    k = apply_rope(_rms(F.linear(h, wk, bk), gk, eps).view(b, length, heads, -1), cos, sin)
    v = F.linear(h, wv, bv).view(b, length, heads, -1)
    return q, k, v


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
) -> torch.Tensor:
    """o projection + gated residual; norm3 -> cross-attention + residual; norm2 -> modulated FFN +
    gated residual. Returns the new fp32 residual stream."""
    b, length, dim = x.shape
    frames = mod.shape[1]
    dtype = wo.dtype
    x = x + gate(F.linear(attn.flatten(2), wo, bo), mod[:, :, 2], frames)
    h = F.layer_norm(x, (dim,), n3w.float(), n3b.float(), eps).to(dtype)
    q = _rms(F.linear(h, cq, cqb), cgq, eps).view(b, length, heads, -1)
    cross = F.scaled_dot_product_attention(q.transpose(1, 2), ck.transpose(1, 2), cv.transpose(1, 2))
    x = x + F.linear(cross.transpose(1, 2).flatten(2), co, cob).float()
    h = modulate(layer_norm(x, eps), mod[:, :, 3], mod[:, :, 4], frames).to(dtype)
    y = F.linear(F.gelu(F.linear(h, f1, f1b), approximate="tanh"), f2, f2b)
    return x + gate(y, mod[:, :, 5], frames)


PreFn = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
PostFn = Callable[..., torch.Tensor]


@dataclass
class BlockKernels:
    """The two block halves a model runs: plain (eager) or compiled."""

    pre: PreFn = pre_attention
    post: PostFn = post_attention
    compiled: bool = False

    @classmethod
    def compiled_versions(cls) -> BlockKernels:
        """torch.compile'd halves (compiled lazily on first call: run warmup before serving)."""
        return cls(pre=torch.compile(pre_attention), post=torch.compile(post_attention), compiled=True)
