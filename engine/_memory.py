"""Sizing the CUDA KV pool from measured memory, so that warm-up and full batches always fit.

The pool is allocated once, up front. What else a full engine needs on the GPU: the decoder's
working set when it decodes `max_batch` sessions at once (activations and their caches; for
wan-1.3b the largest part) and, per session, its decoder cache next to its KV. The working set is
measured by decoding `max_batch` zero chunks (first, then steady) before the pool exists; the
pool gets a fraction of what is then left, split between KV and decoder caches per session.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.config import ModelConfig
from engine.decoders import StreamingDecoder
from engine.errors import ConfigError

__all__ = ["WorkingSet", "check_cuda_kv_budget", "cuda_kv_budget", "measure_decode_working_set"]


@dataclass(frozen=True)
class WorkingSet:
    """peak_bytes: allocation peak of a max_batch first + steady decode (caches included);
    cache_bytes_per_session: what one session holds on the GPU beside its KV slabs: its decoder
    cache after a steady decode and its prompt's cross-attention K/V (`with_cross`)."""

    peak_bytes: int
    cache_bytes_per_session: int


    def with_cross(self, config: ModelConfig, dtype: torch.dtype) -> WorkingSet:
        """The same, counting each session's cached cross-attention K and V too (every layer's,
        for the prompt: 2 x layers x text_len x dim values; 94 MB for wan-1.3b in bf16)."""
        cross = 2 * config.num_layers * config.text_len * config.dim * torch.empty((), dtype=dtype).element_size()
        return WorkingSet(self.peak_bytes, self.cache_bytes_per_session + cross)


@torch.no_grad()
def measure_decode_working_set(decoder: StreamingDecoder, config: ModelConfig, device: torch.device) -> WorkingSet:
    """Decode `max_batch` zero chunks (first, then steady) and read the allocator's peak (CUDA only)."""
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    batch = config.max_batch
    latents = torch.zeros(batch, config.out_dim, config.latent_frames_per_chunk, config.latent_height,
                          config.latent_width, device=device)
    _, first = decoder.decode(latents, [None] * batch)
    del _
    frames, caches = decoder.decode(latents, list(first))
    del first, frames
    torch.cuda.synchronize(device)
    held = torch.cuda.memory_allocated(device) - base  # the latents and max_batch steady caches
    peak = torch.cuda.max_memory_allocated(device) - base
    del caches, latents
    torch.cuda.empty_cache()
    return WorkingSet(peak_bytes=peak, cache_bytes_per_session=max(0, held) // batch)


def _beside_working_set(free_bytes: int, working: WorkingSet, config: ModelConfig) -> float:
    """Bytes left once the decode working set (with its margin for DiT activations) has its room."""
    return free_bytes - working.peak_bytes * (1.0 + config.cuda_working_margin)


def check_cuda_kv_budget(budget: int, free_bytes: int, working: WorkingSet, session_kv_bytes: int,
                         config: ModelConfig) -> int:
    """An explicit KV pool size must leave the decoder its working set at max_batch (and each pooled
    session its decoder cache): otherwise the warm-up or the first full batch runs out of memory.
    Unlike the default size it may take all of what is left (no `cuda_kv_memory_fraction`).
    Returns the sessions the pool holds."""
    sessions = budget // session_kv_bytes
    need = sessions * (session_kv_bytes + working.cache_bytes_per_session)
    usable = _beside_working_set(free_bytes, working, config)
    if need > usable:
        fits = max(0, int(usable // (session_kv_bytes + working.cache_bytes_per_session)))
        raise ConfigError(
            "kv_budget_too_large",
            f"a KV pool of {budget / 2**30:.1f} GiB ({sessions} sessions with their decoder caches, "
            f"{need / 2**30:.1f} GiB) does not fit beside the decoder's working set at max_batch={config.max_batch} "
            f"({working.peak_bytes / 2**30:.1f} GiB measured) in the {free_bytes / 2**30:.1f} GiB free: "
            f"pass at most {fits * session_kv_bytes / 2**30:.1f} GiB ({fits} sessions), or lower max_batch",
        )
    return sessions


def cuda_kv_budget(free_bytes: int, working: WorkingSet, session_kv_bytes: int, config: ModelConfig) -> int:
    """KV pool bytes (a whole number of sessions' KV) that leave room for the working set and for
    every pooled session's decoder cache."""
    usable = _beside_working_set(free_bytes, working, config) * config.cuda_kv_memory_fraction
    per_session = session_kv_bytes + working.cache_bytes_per_session
    sessions = min(int(usable // per_session), config.cuda_kv_max_sessions) if usable > 0 else 0
    if sessions < 1:
        raise ConfigError(
            "kv_budget_too_small",
            f"{free_bytes / 2**30:.1f} GiB free on the GPU leaves no room for one session after the decoder's "
            f"working set at max_batch={config.max_batch} ({working.peak_bytes / 2**30:.1f} GiB measured): "
            "lower max_batch, free GPU memory, or pass kv_budget_bytes",
        )
    return sessions * session_kv_bytes
