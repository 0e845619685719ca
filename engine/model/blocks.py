"""Transformer blocks of the causal DiT; parameter names follow Wan2.1's WanAttentionBlock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from engine.attention import AttentionBackend
from engine.model._fused import BlockKernels
from engine.model.layers import AffineLayerNorm, RMSNorm, layer_norm, modulate

__all__ = ["AttnContext", "Block", "Head"]

KVGather = Callable[[int], tuple[torch.Tensor, torch.Tensor]]
KVWrite = Callable[[int, torch.Tensor, torch.Tensor], None]


@dataclass
class AttnContext:
    """What self-attention reads and writes besides the current tokens.

    gather(layer) -> (k, v) of the context tokens (B, Lc, heads, d), RoPE already applied, as a
    copy (the gather runs before the write, which may overwrite a slab the context read);
    write(layer, k, v) stores the current tokens' roped K/V (the cache pass);
    mask: bool (B, 1, Lq, Lc + Lq), True = attend; None = attend to everything.
    """

    cos: torch.Tensor  # (B, Lq, 1, d/2)
    sin: torch.Tensor
    gather: KVGather | None = None
    write: KVWrite | None = None
    mask: torch.Tensor | None = None


class _Projections(nn.Module):
    """q, k, v, o linears with RMS norms on q and k (Wan's self_attn / cross_attn names)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q = RMSNorm(dim, eps)
        self.norm_k = RMSNorm(dim, eps)


class Block(nn.Module):
    """norm1 -> modulated self-attn -> gated residual; norm3 -> cross-attn; norm2 -> modulated FFN."""

    def __init__(self, dim: int, ffn_dim: int, num_heads: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.num_heads = num_heads
        self.self_attn = _Projections(dim, eps)
        self.norm3 = AffineLayerNorm(dim, eps)
        self.cross_attn = _Projections(dim, eps)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.GELU(approximate="tanh"), nn.Linear(ffn_dim, dim))
        self.modulation = nn.Parameter(torch.randn(1, 6, dim) / dim**0.5)

    def cross_kv(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-attention K, V of prompt embeddings (B, text_len, dim) -> (B, text_len, heads, d)."""
        b, length, _ = context.shape
        ca = self.cross_attn
        k = ca.norm_k(ca.k(context)).view(b, length, self.num_heads, -1)
        v = ca.v(context).view(b, length, self.num_heads, -1)
        return k, v

    def forward(
        self,
        x: torch.Tensor,  # (B, L, dim) fp32 residual stream
        e: torch.Tensor,  # (B, frames, 6, dim) fp32 per-frame modulation
        context: torch.Tensor,  # (B, text_len, dim) compute dtype
        layer: int,
        ctx: AttnContext,
        attend: AttentionBackend,
        kernels: BlockKernels,
    ) -> torch.Tensor:
        sa, ca, ffn = self.self_attn, self.cross_attn, self.ffn
        mod = self.modulation.float().unsqueeze(1) + e  # (B, frames, 6, dim)
        q, k, v = kernels.pre(
            x, mod, sa.q.weight, sa.q.bias, sa.k.weight, sa.k.bias, sa.v.weight, sa.v.bias,
            sa.norm_q.weight, sa.norm_k.weight, ctx.cos, ctx.sin, self.num_heads, self.eps,
        )
        k_all, v_all = k, v
        if ctx.gather is not None:  # read the context before writing: the write may reuse its slab
            k_ctx, v_ctx = ctx.gather(layer)
            k_all = torch.cat([k_ctx, k], dim=1)
            v_all = torch.cat([v_ctx, v], dim=1)
        if ctx.write is not None:
            ctx.write(layer, k, v)
        out = attend(q, k_all, v_all, ctx.mask)  # (B, Lq, heads, d)
        ck, cv = self.cross_kv(context)
        return kernels.post(
            x, out, mod, sa.o.weight, sa.o.bias, self.norm3.weight, self.norm3.bias,
            ca.q.weight, ca.q.bias, ca.norm_q.weight, ck, cv, ca.o.weight, ca.o.bias,
            ffn[0].weight, ffn[0].bias, ffn[2].weight, ffn[2].bias, self.num_heads, self.eps,
        )


class Head(nn.Module):
    def __init__(self, dim: int, out_features: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.head = nn.Linear(dim, out_features)
        self.modulation = nn.Parameter(torch.randn(1, 2, dim) / dim**0.5)

    def forward(self, x: torch.Tensor, e: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """x (B, L, dim) fp32; e (B, frames, dim) fp32 -> (B, L, out_features)."""
        shift, scale = (self.modulation.float().unsqueeze(1) + e.unsqueeze(2)).unbind(dim=2)
        h = modulate(layer_norm(x, self.eps), shift, scale, e.shape[1]).to(dtype)
        return self.head(h)  # type: ignore[no-any-return]
