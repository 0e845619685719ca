"""Chunk-by-chunk rollout through the KV pool == one full-sequence block-causal forward."""

from __future__ import annotations

import torch

from engine.session import ChunkRecord
from tests.engine._helpers import make_engine

CHUNKS = 6  # tiny: sink 1 + window 2, so the ring wraps twice


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def _inputs(engine, chunks: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # type: ignore[no-untyped-def]
    c = engine.config
    gen = torch.Generator().manual_seed(7)
    frames = chunks * c.latent_frames_per_chunk
    latents = torch.randn(1, c.in_dim, frames, c.latent_height, c.latent_width, generator=gen)
    actions = torch.rand(frames, c.action_features, generator=gen)
    context = engine.embed_prompt("a quiet valley")[None]
    return latents, actions, context


def _chunk(x: torch.Tensor, i: int, frames: int) -> torch.Tensor:
    return x[:, :, i * frames : (i + 1) * frames]


def test_cache_pass_rollout_equals_full_sequence_forward_across_window_wraparound() -> None:
    engine = make_engine()
    parts, c = engine.parts, engine.config
    f = c.latent_frames_per_chunk
    latents, actions, context = _inputs(engine, CHUNKS)
    t = torch.zeros(1, CHUNKS * f)
    with torch.no_grad():
        full = parts.model.forward_full(latents, t, actions[None], context, parts.rope, parts.attend)
    engine.open_session("s", seed=0, prompt="unused")
    handle = engine.session("s").handle
    for i in range(CHUNKS):
        record = ChunkRecord(i, _chunk(latents, i, f)[0], actions[i * f : (i + 1) * f], "p")
        slabs = handle.context_slabs(i)
        write = handle.slab_for_write(engine.pool, i)
        out = engine.runner.forward(_chunk(latents, i, f), [0.0], [record], context, [slabs], [write])
        handle.mark_written(engine.pool, i)
        assert _rel_err(out, _chunk(full, i, f)) <= 1e-5, f"chunk {i}"


def test_denoise_step_with_cached_context_equals_full_forward_with_per_frame_timesteps() -> None:
    engine = make_engine()
    parts, c = engine.parts, engine.config
    f = c.latent_frames_per_chunk
    latents, actions, context = _inputs(engine, CHUNKS)
    engine.open_session("s", seed=0, prompt="unused")
    handle = engine.session("s").handle
    noisy = torch.randn(latents.shape, generator=torch.Generator().manual_seed(3))
    sigma_t = parts.schedule.timestep(1)
    for i in range(CHUNKS):
        record = ChunkRecord(i, _chunk(latents, i, f)[0], actions[i * f : (i + 1) * f], "p")
        # the noisy current chunk against the clean cached context
        step = engine.runner.forward(_chunk(noisy, i, f), [sigma_t], [record], context, [handle.context_slabs(i)], None)
        mixed = torch.cat([latents[:, :, : i * f], _chunk(noisy, i, f)], dim=2)
        t = torch.zeros(1, (i + 1) * f)
        t[:, i * f :] = sigma_t
        with torch.no_grad():
            full = parts.model.forward_full(mixed, t, actions[None, : (i + 1) * f], context, parts.rope, parts.attend)
        assert _rel_err(step, _chunk(full, i, f)) <= 1e-5, f"chunk {i}"
        write = handle.slab_for_write(engine.pool, i)
        engine.runner.forward(_chunk(latents, i, f), [0.0], [record], context, [handle.context_slabs(i)], [write])
        handle.mark_written(engine.pool, i)


def test_the_block_causal_mask_is_sink_plus_window_plus_own_chunk() -> None:
    from engine.model import block_causal_mask

    mask = block_causal_mask(num_chunks=5, tokens_per_chunk=1, sink=1, window=2)
    assert mask.int().tolist() == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0],
        [1, 0, 1, 1, 1],
    ]
