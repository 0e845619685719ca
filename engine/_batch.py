"""Assembling one batched forward over sessions at different chunk indices and context lengths.

Linear layers and the fused block halves run over the whole batch; self-attention runs over
[current chunk | its context slabs] per sample, once for the whole batch when the backend packs
samples of different key lengths (FA3's variable-length interface), else once per group of samples
with the same number of context slabs, so sessions with different context lengths batch together
with no padding and no mask (a padded, masked batch measured 2x slower on the H200 than this). One call per sample instead measured
15 fps per session for 32 demo sessions on the H200 (Python and launch overhead per sample);
warm-up covers every (group size, context length) attention shape.
"""

from __future__ import annotations

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
    cos, sin = rope.for_frames(frame_starts, frames)
    ctx = AttnContext(cos=cos, sin=sin, contexts=context_slabs, read=pool.read, read_packed=pool.read_packed,
                      read_means=pool.read_means if pool.means is not None else None)
    if write_slabs is not None:
        slabs = list(write_slabs)
        ctx.write = lambda layer, k, v, centre: pool.write(layer, slabs, k, v, centre)
    return ctx
