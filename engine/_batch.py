"""Assembling one batched forward over sessions at different chunk indices and context lengths.

Context slab ids are padded per sample to the longest context (pad entries point at a real slab
and are masked out), so one gather per layer reads every sample's context and one SDPA call
attends; when all samples have the same context length no mask is built at all.
"""

from __future__ import annotations

import torch

from engine.kv import ChunkKVPool
from engine.model import AttnContext
from engine.rope import RopeTable

__all__ = ["attn_context"]


def attn_context(
    pool: ChunkKVPool,
    rope: RopeTable,
    context_slabs: list[list[int]],
    frame_starts: list[int],
    frames: int,
    write_slabs: list[int] | None,
) -> AttnContext:
    device = pool.device
    cos, sin = rope.for_frames(frame_starts, frames)
    ctx = AttnContext(cos=cos, sin=sin)
    tokens = pool.geometry.tokens
    counts = [len(slabs) for slabs in context_slabs]
    longest = max(counts)
    if longest:
        pad = next(s[0] for s in context_slabs if s)
        rows = [slabs + [pad] * (longest - len(slabs)) for slabs in context_slabs]
        index = torch.tensor(rows, device=device, dtype=torch.long)  # (B, N)
        ctx.gather = lambda layer: pool.gather(layer, index)
        if min(counts) != longest:
            q_len = cos.shape[1]  # current tokens
            key_chunk = torch.arange(longest, device=device).repeat_interleave(tokens)  # (N*T,)
            valid = key_chunk[None, :] < torch.tensor(counts, device=device)[:, None]  # (B, N*T)
            valid = torch.cat([valid, valid.new_ones(len(counts), q_len)], dim=1)  # + current tokens
            ctx.mask = valid[:, None, None, :].expand(-1, 1, q_len, -1)
    if write_slabs is not None:
        slabs = torch.tensor(write_slabs, device=device, dtype=torch.long)
        ctx.write = lambda layer, k, v: pool.write(layer, slabs, k, v)
    return ctx
