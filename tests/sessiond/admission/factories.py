"""Small factories for admission tests: a model shape and a cost model with known costs."""

from __future__ import annotations

from collections.abc import Callable

from engine.api import ActionSpace, ModelInfo
from sessiond.admission import CostModel


def model_info(*, fps: int = 16, frames_per_chunk: int = 16, denoise_steps: int = 4,
               kv_bytes: int = 1000, first_chunk_frames: int | None = 0) -> ModelInfo:
    """A model shape; by default a stream's first chunk shows nothing (a whole chunk of lead-in)."""
    return ModelInfo(name="known", width=64, height=64, fps=fps, frames_per_chunk=frames_per_chunk,
                     latent_frames_per_chunk=4, denoise_steps=denoise_steps, action_space=ActionSpace(keys=("w",)),
                     kv_bytes_per_session=kv_bytes, device="cpu", dtype="float32",
                     first_chunk_frames=first_chunk_frames)


def known_cost(chunk_seconds_b1: float, *, per_extra_session: float | None = None,
               clock: Callable[[], float] | None = None, context_chunks: int | None = None) -> CostModel:
    """A chunk of 1 media second that costs `chunk_seconds_b1` at batch 1 (denoise 4 x 1/8, cache 1/4,
    decode 1/4 of it); at batch b it costs chunk x (1 + (b - 1) x per_extra_session) when given,
    else the model only knows batch 1 (and assumes no batching gain)."""
    cost = CostModel(model_info(), context_chunks=context_chunks) if clock is None else CostModel(
        model_info(), clock=clock, context_chunks=context_chunks)
    batches = [1] if per_extra_session is None else [1, 2, 4, 8]
    for b in batches:
        scale = 1.0 if per_extra_session is None else 1.0 + (b - 1) * per_extra_session
        cost.record("denoise", b, 0, chunk_seconds_b1 * scale / 8)
        cost.record("cache", b, 0, chunk_seconds_b1 * scale / 4)
        cost.record("decode", b, 0, chunk_seconds_b1 * scale / 4)
    return cost
