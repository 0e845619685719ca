"""Transformer blocks of the causal DiT; parameter names follow Wan2.1's WanAttentionBlock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from engine.attention import AttentionBackend
from engine.attention_fa3 import Descale
from engine.kv.pool import as_bits
from engine.model._fused import QKV, BlockKernels, Fp8Linear, Fp8Pair, quantize_rows
from engine.model.kv_fp8 import KVFp8
from engine.model.layers import AffineLayerNorm, RMSNorm, layer_norm, modulate

__all__ = ["AttnContext", "Block", "Head", "fp8_attention_by_chunks"]

KVRead = Callable[[int, list[list[int]], torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
KVReadPacked = Callable[[int, list[list[int]], torch.Tensor, torch.Tensor],
                        tuple[torch.Tensor, torch.Tensor, list[int]]]
KVWrite = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor | None], None]
KVReadMeans = Callable[[int, list[list[int]], torch.Tensor], torch.Tensor]


@dataclass
class AttnContext:
    """What self-attention reads and writes besides the current tokens.

    contexts: None -> attend the current tokens only, under `mask` (the full-sequence forward);
    else one slab-id list per sample (its context chunks), keys = [current chunk | its context], so
    no padding or mask is needed and sessions at different context lengths still share a batch:
    one attention call for the whole batch when every sample has as many context chunks, or when
    the backend packs samples of different key lengths (`AttentionBackend.packs`, with
    `read_packed`); else one call per group of samples with the same number of context chunks;
    read(layer, slabs, k, v) -> (K, V) (G, (N+1)*T, heads, d): per sample of a group its current
    k, v (T, heads, d) followed by its slabs' (RoPE already applied), as a copy, so the write may
    then reuse a slab;
    read_packed(layer, slabs, k, v) -> (K, V, key lengths): the same for samples of any context
    lengths, concatenated along the sequence ((sum of key lengths, heads, d));
    write(layer, k, v, centre) stores the current tokens' roped K/V of the whole batch (the cache
    pass), and with e4m3 values the chunk mean they were centred by (B, heads, d), else None;
    read_means(layer, slabs, centre) -> (chunks, heads, d): with e4m3 values, the means of the chunks
    `read`/`read_packed` return, in their order (per sample: its current chunk's, then its slabs');
    mask: bool (B, 1, Lq, Lk), True = attend (only without contexts).
    """

    cos: torch.Tensor  # (B, Lq, 1, d/2)
    sin: torch.Tensor
    contexts: list[list[int]] | None = None
    read: KVRead | None = None
    write: KVWrite | None = None
    mask: torch.Tensor | None = None
    read_packed: KVReadPacked | None = None
    read_means: KVReadMeans | None = None


def fp8_attention_by_chunks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, centre: torch.Tensor, layer: int,
                        ctx: AttnContext, attend: AttentionBackend, kernels: BlockKernels, descale: Descale,
                        dtype: torch.dtype) -> torch.Tensor:
    """Self-attention over e4m3 q, k, v whose values are centred by their chunk's own mean
    (engine.model.kv_fp8): one call per chunk of keys -- the current chunk and each context slab,
    all in one launch, q repeated per chunk -- merged by log-sum-exp with each chunk's mean added
    back (`merge_chunks`). (B, Lq, heads, d) in `dtype`."""
    if ctx.contexts is None:  # the masked full-sequence forward (references): one chunk of keys
        return (attend(q, k, v, ctx.mask, descale).float() + centre[:, None]).to(dtype)
    counts = [len(slabs) + 1 for slabs in ctx.contexts]
    tokens = q.shape[1]
    if max(counts) == 1:
        keys, values, means = k, v, centre
    else:
        if ctx.read_means is None:
            raise ValueError("FP8 attention over context slabs needs AttnContext.read_means")
        if len(set(counts)) == 1 and ctx.read is not None:
            keys, values = ctx.read(layer, ctx.contexts, k, v)  # (B, C*T, heads, d)
        elif ctx.read_packed is not None:
            keys, values, _ = ctx.read_packed(layer, ctx.contexts, k, v)  # (sum of C*T, heads, d)
        else:
            raise ValueError("FP8 attention over context slabs needs AttnContext.read or read_packed")
        means = ctx.read_means(layer, ctx.contexts, centre)
    keys, values = keys.reshape(-1, tokens, *k.shape[2:]), values.reshape(-1, tokens, *v.shape[2:])
    uniform = len(set(counts)) == 1
    if max(counts) == 1:
        repeated = q  # one chunk of keys per sample: q as it is
    elif uniform:
        repeated = as_bits(q).repeat_interleave(counts[0], dim=0).view(q.dtype)
    else:
        repeated = torch.cat([as_bits(q[row : row + 1]).expand(c, *q.shape[1:]) for row, c in enumerate(counts)]
                             ).view(q.dtype)
    out, lse = attend.with_lse(repeated, keys, values, descale)  # (chunks, T, heads, d), (chunks, heads, T)
    if uniform:
        c = counts[0]
        return kernels.merge(out.view(-1, c, *out.shape[1:]), lse.view(-1, c, *lse.shape[1:]),
                             means.view(-1, c, *means.shape[1:]), dtype)
    parts, start = [], 0
    for c in counts:
        part = slice(start, start + c)
        parts.append(kernels.merge(out[None, part], lse[None, part], means[None, part], dtype))
        start += c
    return torch.cat(parts)


def _self_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int, ctx: AttnContext, attend: AttentionBackend,
) -> torch.Tensor:
    if ctx.contexts is None:
        return attend(q, k, v, ctx.mask)
    groups: dict[int, list[int]] = {}  # context chunks -> rows, in batch order
    for row, slabs in enumerate(ctx.contexts):
        groups.setdefault(len(slabs), []).append(row)
    if len(groups) == 1:  # every sample at the same context length: the whole batch at once
        return _attend_rows(q, k, v, list(range(q.shape[0])), layer, ctx, attend)
    if attend.packs and ctx.read_packed is not None:  # different lengths, one packed call
        keys, values, lengths = ctx.read_packed(layer, ctx.contexts, k, v)
        return attend.packed(q, keys, values, lengths)
    result: torch.Tensor | None = None
    for rows in groups.values():
        out = _attend_rows(q, k, v, rows, layer, ctx, attend)
        if result is None:
            # the strides of a one-group output (the backend's layout, batch outermost): the
            # compiled block half after attention guards on strides, so it must see one layout
            # whatever the grouping (see also _fused._without_view_bases)
            result = torch.empty_strided((q.shape[0], *out.shape[1:]), out.stride(), dtype=out.dtype,
                                         device=out.device)
        if rows == list(range(rows[0], rows[0] + len(rows))):
            result[rows[0] : rows[0] + len(rows)].copy_(out)
        else:
            for i, row in enumerate(rows):
                result[row].copy_(out[i])
    assert result is not None
    return result


def _rows(t: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """t[rows] without an index tensor (host ints: no host-to-device copy)."""
    if rows == list(range(rows[0], rows[0] + len(rows))):
        return t[rows[0] : rows[0] + len(rows)]
    return torch.cat([t[row : row + 1] for row in rows], dim=0)


def _attend_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rows: list[int], layer: int,
                 ctx: AttnContext, attend: AttentionBackend) -> torch.Tensor:
    """Attention for samples `rows`, which all have the same number of context slabs."""
    assert ctx.contexts is not None
    qs, ks, vs = _rows(q, rows), _rows(k, rows), _rows(v, rows)
    slabs = [ctx.contexts[row] for row in rows]
    if slabs[0] and ctx.read is not None:
        ks, vs = ctx.read(layer, slabs, ks, vs)
    return attend(qs, ks, vs, None)


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
        self.ffn_fp8: Fp8Pair | None = None  # set by quantize_ffn(): the FFN weights in e4m3
        self.kv_fp8: KVFp8 | None = None  # set by CausalDiT.set_kv_fp8(): q, k, v come out in e4m3
        self.qkv_fp8: Fp8Linear | None = None  # set by quantize_projections(): q/k/v and cross q GEMMs in e4m3
        self.cross_q_fp8: Fp8Linear | None = None

    @torch.no_grad()
    def quantize_ffn(self) -> None:
        """Keep an e4m3 copy of the FFN weights with one scale per output channel (not in the
        state dict); the block's FFN then runs its GEMMs in FP8."""
        first, second = self.ffn[0], self.ffn[2]
        assert isinstance(first, nn.Linear) and isinstance(second, nn.Linear)
        w1, s1 = quantize_rows(first.weight)
        w2, s2 = quantize_rows(second.weight)
        self.ffn_fp8 = (w1, s1.t().contiguous(), w2, s2.t().contiguous())

    @torch.no_grad()
    def quantize_projections(self) -> None:
        """Keep e4m3 copies (one scale per output channel, not in the state dict) of the q, k, v
        weights, as one (3 dim, dim) matrix, and of the cross-attention q weight; those GEMMs then
        run in FP8, their activations quantized per token inside the norm kernel before them."""
        sa, cq = self.self_attn, self.cross_attn.q
        weight, scale = quantize_rows(torch.cat([sa.q.weight, sa.k.weight, sa.v.weight]))
        self.qkv_fp8 = (weight, scale.t().contiguous(), torch.cat([sa.q.bias, sa.k.bias, sa.v.bias]))
        weight, scale = quantize_rows(cq.weight)
        self.cross_q_fp8 = (weight, scale.t().contiguous(), cq.bias)

    def cross_kv(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-attention K, V of prompt embeddings (B, text_len, dim) -> (B, text_len, heads, d)."""
        b, length, _ = context.shape
        ca = self.cross_attn
        k = ca.norm_k(ca.k(context)).view(b, length, self.num_heads, -1)
        v = ca.v(context).view(b, length, self.num_heads, -1)
        return k, v

    def _qkv(self, x: torch.Tensor, e: torch.Tensor, ctx: AttnContext, kernels: BlockKernels
             ) -> tuple[torch.Tensor, QKV]:
        """The block modulation (B, frames, 6, dim) and q, k, v (B, L, heads, d) after RMS norm and RoPE,
        with v's chunk mean (B, heads, d) when they are e4m3 (else None)."""
        sa = self.self_attn
        mod = self.modulation.float().unsqueeze(1) + e
        q, k, v, centre = kernels.pre(
            x, mod, sa.q.weight, sa.q.bias, sa.k.weight, sa.k.bias, sa.v.weight, sa.v.bias,
            sa.norm_q.weight, sa.norm_k.weight, ctx.cos, ctx.sin, self.num_heads, self.eps,
            fp8=None if self.kv_fp8 is None else self.kv_fp8.quant_args(), qkv_fp8=self.qkv_fp8,
        )
        if centre is not None:  # the compiled half with FP8 projections handed it back flattened to
            centre = centre.view(v.shape[0], *v.shape[2:])  # (B * heads * d,) (torch 2.11, H100 and H200)
        return mod, (q, k, v, centre)

    def write_kv(self, x: torch.Tensor, e: torch.Tensor, layer: int, ctx: AttnContext, kernels: BlockKernels) -> None:
        """Only what a cache pass keeps of this block: its K and V, written through `ctx.write`."""
        assert ctx.write is not None, "write_kv needs a KV write target"
        _, (_, k, v, centre) = self._qkv(x, e, ctx, kernels)
        ctx.write(layer, k, v, centre)

    def forward(
        self,
        x: torch.Tensor,  # (B, L, dim) fp32 residual stream
        e: torch.Tensor,  # (B, frames, 6, dim) fp32 per-frame modulation
        context: torch.Tensor,  # (B, text_len, dim) compute dtype
        layer: int,
        ctx: AttnContext,
        attend: AttentionBackend,
        kernels: BlockKernels,
        cross_kv: tuple[torch.Tensor, torch.Tensor] | None = None,  # this block's prompt K, V if known
    ) -> torch.Tensor:
        sa, ca, ffn = self.self_attn, self.cross_attn, self.ffn
        mod, (q, k, v, centre) = self._qkv(x, e, ctx, kernels)
        if self.kv_fp8 is None or centre is None:
            out = _self_attention(q, k, v, layer, ctx, attend)  # (B, Lq, heads, d); reads before the write
        else:  # v went in centred by its chunk's mean; each chunk's comes back in the merge
            out = fp8_attention_by_chunks(q, k, v, centre, layer, ctx, attend, kernels, self.kv_fp8.descale,
                                          sa.o.weight.dtype)
        if ctx.write is not None:
            ctx.write(layer, k, v, centre)
        ck, cv = self.cross_kv(context) if cross_kv is None else cross_kv
        return kernels.post(
            x, out, mod, sa.o.weight, sa.o.bias, self.norm3.weight, self.norm3.bias,
            ca.q.weight, ca.q.bias, ca.norm_q.weight, ck, cv, ca.o.weight, ca.o.bias,
            ffn[0].weight, ffn[0].bias, ffn[2].weight, ffn[2].bias, self.num_heads, self.eps,
            ffn_fp8=self.ffn_fp8, cross_q_fp8=self.cross_q_fp8,
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
