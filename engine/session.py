"""Per-session generation state: everything a session needs between chunks, nothing global."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from engine.api import Phase
from engine.kv import KVHandle

__all__ = ["ChunkRecord", "ChunkWork", "EngineSession"]


@dataclass
class ChunkRecord:
    """A finished chunk's continuation state: clean latents and the conditioning it was made with."""

    index: int
    latents: torch.Tensor  # (C, frames, h, w) fp32
    actions: torch.Tensor  # (frames, features) fp32
    prompt: str


@dataclass
class ChunkWork:
    """The chunk in progress."""

    index: int
    x: torch.Tensor  # (C, frames, h, w) fp32: noisy latents at the next step's sigma
    actions: torch.Tensor  # (frames, features) fp32 on the device
    context: torch.Tensor  # (text_len, dim) prompt embedding after the text MLP
    prompt: str
    steps: int
    cross: tuple[torch.Tensor, torch.Tensor] | None = None  # every block's cross-attn K, V: (layers, 1, text_len, heads, d)
    step: int = 0  # denoise steps done
    clean: torch.Tensor | None = None  # (C, frames, h, w) after the last denoise step
    decoded_latents: int = 0  # latent frames decoded (decode runs before the cache pass: first frames sooner)
    kv_written: bool = False  # the last denoise pass wrote the chunk's K/V (kv_from_last_pass)
    # prompt_change_guidance: the prompt the session changed from (its embedding and cross K, V), for
    # a chunk among the first begun under the new one; None otherwise
    old_context: torch.Tensor | None = None
    old_cross: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def decoded(self) -> bool:
        """Every frame of the chunk is out."""
        return self.decoded_latents >= self.x.shape[1]

    @property
    def phase(self) -> Phase:
        """DENOISE x steps, then DECODE (once, or twice for a split first chunk), then CACHE
        (which finishes the chunk)."""
        if self.step < self.steps:
            return Phase.DENOISE
        return Phase.CACHE if self.decoded else Phase.DECODE


@dataclass
class EngineSession:
    """One session's generation state inside the engine: KV handle, chunk in progress, records,
    decoder caches (the daemon keeps its own view of a session's lifecycle)."""

    session_id: str
    seed: int
    prompt: str  # applies to the next chunk begun
    handle: KVHandle
    next_chunk: int = 0
    work: ChunkWork | None = None
    decoded: int = 0  # chunks decoded so far
    delivered: int = -1
    decoder_cache: Any | None = None
    cache_before: dict[int, Any] = field(default_factory=dict)  # chunk -> decoder cache before it
    records: dict[int, ChunkRecord] = field(default_factory=dict)
    context_prompt: str | None = None  # prompt whose embedding is in `context`
    context: torch.Tensor | None = None
    cross: tuple[torch.Tensor, torch.Tensor] | None = None  # cross-attention K, V of `context` (see ChunkWork)
    # the last prompt change: (the first chunk begun under the new prompt, the prompt before it)
    prompt_changed: tuple[int, str] | None = None

    def phase(self) -> Phase | None:
        return None if self.work is None else self.work.phase

    def trim(self, sink: int, window: int) -> None:
        """Forget records and decoder checkpoints that neither the context nor rollback can need:
        keep the sink chunks and the window before the earliest chunk rollback can return to."""
        floor = self.handle.rollback_floor
        keep_from = floor - window
        for index in [i for i in self.records if i >= sink and i < keep_from]:
            del self.records[index]
        for index in [i for i in self.cache_before if i < floor]:
            del self.cache_before[index]
