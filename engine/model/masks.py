"""The block-causal sink + window attention pattern, as a dense mask for full-sequence forwards."""

from __future__ import annotations

import torch

__all__ = ["block_causal_mask", "context_chunks"]


def context_chunks(chunk: int, sink: int, window: int) -> list[int]:
    """Earlier chunks that chunk `chunk` attends to: the sink chunks and the last `window` chunks."""
    return [j for j in range(chunk) if j < sink or j >= chunk - window]


def block_causal_mask(
    num_chunks: int, tokens_per_chunk: int, sink: int, window: int, device: torch.device | None = None
) -> torch.Tensor:
    """bool (L, L), L = num_chunks * tokens_per_chunk, True where a query token may attend a key:
    same chunk (bidirectional), a sink chunk, or one of the `window` chunks before it."""
    chunk = torch.arange(num_chunks, device=device).repeat_interleave(tokens_per_chunk)
    q, k = chunk[:, None], chunk[None, :]
    return (k <= q) & ((k < sink) | (k >= q - window))
