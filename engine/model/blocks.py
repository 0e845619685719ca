"""Transformer blocks of the causal DiT; parameter names follow Wan2.1's WanAttentionBlock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from engine.attention import AttentionBackend
from engine.model.layers import AffineLayerNorm, RMSNorm, gate, layer_norm, modulate
from engine.rope import apply_rope

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


class SelfAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int, eps: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q = RMSNorm(dim, eps)
        self.norm_k = RMSNorm(dim, eps)

    def forward(
        self, x: torch.Tensor, layer: int, ctx: AttnContext, attend: AttentionBackend
    ) -> torch.Tensor:
        b, length, _ = x.shape
        heads = (self.num_heads, -1)
        q = apply_rope(self.norm_q(self.q(x)).view(b, length, *heads), ctx.cos, ctx.sin)
        k = apply_rope(self.norm_k(self.k(x)).view(b, length, *heads), ctx.cos, ctx.sin)
        v = self.v(x).view(b, length, *heads)
        k_new, v_new = k, v
        if ctx.gather is not None:  # read the context before writing: the write may reuse its slab
            k_ctx, v_ctx = ctx.gather(layer)
            k = torch.cat([k_ctx, k], dim=1)
            v = torch.cat([v_ctx, v], dim=1)
        if ctx.write is not None:
            ctx.write(layer, k_new, v_new)
        out = attend(q, k, v, ctx.mask)  # (B, Lq, heads, d)
        return self.o(out.flatten(2))  # type: ignore[no-any-return]


class CrossAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int, eps: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q = RMSNorm(dim, eps)
        self.norm_k = RMSNorm(dim, eps)

    def forward(self, x: torch.Tensor, context: torch.Tensor, attend: AttentionBackend) -> torch.Tensor:
        b, length, _ = x.shape
        q = self.norm_q(self.q(x)).view(b, length, self.num_heads, -1)
        k = self.norm_k(self.k(context)).view(b, context.shape[1], self.num_heads, -1)
        v = self.v(context).view(b, context.shape[1], self.num_heads, -1)
        return self.o(attend(q, k, v, None).flatten(2))  # type: ignore[no-any-return]


class Block(nn.Module):
    """norm1 -> modulated self-attn -> gated residual; norm3 -> cross-attn; norm2 -> modulated FFN."""

    def __init__(self, dim: int, ffn_dim: int, num_heads: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.self_attn = SelfAttention(dim, num_heads, eps)
        self.norm3 = AffineLayerNorm(dim, eps)
        self.cross_attn = CrossAttention(dim, num_heads, eps)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.GELU(approximate="tanh"), nn.Linear(ffn_dim, dim))
        self.modulation = nn.Parameter(torch.randn(1, 6, dim) / dim**0.5)

    def forward(
        self,
        x: torch.Tensor,  # (B, L, dim) fp32 residual stream
        e: torch.Tensor,  # (B, frames, 6, dim) fp32 per-frame modulation
        context: torch.Tensor,  # (B, text_len, dim) compute dtype
        layer: int,
        ctx: AttnContext,
        attend: AttentionBackend,
    ) -> torch.Tensor:
        frames = e.shape[1]
        dtype = context.dtype
        mod = (self.modulation.float().unsqueeze(1) + e).unbind(dim=2)  # 6 x (B, frames, dim)
        h = modulate(layer_norm(x, self.eps), mod[0], mod[1], frames).to(dtype)
        x = x + gate(self.self_attn(h, layer, ctx, attend), mod[2], frames)
        x = x + self.cross_attn(self.norm3(x).to(dtype), context, attend).float()
        h = modulate(layer_norm(x, self.eps), mod[3], mod[4], frames).to(dtype)
        return x + gate(self.ffn(h), mod[5], frames)


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
