"""Assembling one batched forward over sessions at different chunk indices and context lengths.

Linear layers run over the whole batch; self-attention runs once per group of samples with the
same number of context chunks (keys = the current chunk + that many slabs gathered from the
pool), so no padding and no mask: a padded, masked batch measured slower on the GPU than the
samples one by one.
"""

from __future__ import annotations

import torch

from engine.kv import ChunkKVPool
from engine.model import AttnContext, ContextGroup
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
    ctx = AttnContext(cos=cos, sin=sin, read=pool.read)
    by_count: dict[int, list[int]] = {}
    for row, slabs in enumerate(context_slabs):
        by_count.setdefault(len(slabs), []).append(row)
    whole = len(by_count) == 1
    for count, rows in by_count.items():
        slab_ids = [context_slabs[r] for r in rows] if count else None
        index = None if whole else torch.tensor(rows, device=device, dtype=torch.long)
        ctx.groups.append(ContextGroup(rows=index, slabs=slab_ids))
    if write_slabs is not None:
        slab_index = torch.tensor(write_slabs, device=device, dtype=torch.long)
        ctx.write = lambda layer, k, v: pool.write(layer, slab_index, k, v)
    return ctx
