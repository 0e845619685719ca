"""The fixed FP8 scales of self-attention's q, k, v (engine.model.kv_fp8), measured once when an
engine with FP8 attention is built: one chunk sampled from seeded noise through the model in its
compute dtype (every denoise step, unguided), then its cache pass at t = 0 on the clean chunk, each
attending to itself (no KV cache), recording each layer's roped k (for its mean key), v (for its
peak) and, in the cache pass, v's mean on the way."""

from __future__ import annotations

from typing import cast

import torch

from engine.attention import AttentionBackend
from engine.model import AttnContext, CausalDiT
from engine.model.blocks import Block
from engine.model.kv_fp8 import KVFp8, KVFp8Stats
from engine.rope import RopeTable
from engine.sampling import Schedule, seeded_noise

__all__ = ["calibrate_kv_fp8"]

CALIBRATION_SEED = 0


@torch.no_grad()
def calibrate_kv_fp8(model: CausalDiT, rope: RopeTable, schedule: Schedule, context: torch.Tensor) -> list[KVFp8]:
    """One KVFp8 per block. `context`: (text_len, dim) embedded prompt. The model must still run in
    its compute dtype (no scales set)."""
    c = model.config
    device = context.device
    layers = len(model.blocks)
    stats = [KVFp8Stats(torch.zeros(c.num_heads, c.head_dim, dtype=torch.float64, device=device))
             for _ in range(layers)]
    seen = [0]

    def record(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        stats[seen[0] % layers].add(k, v, cache_pass=seen[0] // layers == schedule.steps)
        seen[0] += 1
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask).transpose(1, 2)

    attend = AttentionBackend(name="sdpa", _fn=record)
    frames = c.latent_frames_per_chunk
    shape = (c.in_dim, frames, c.latent_height, c.latent_width)
    latents = seeded_noise(shape, CALIBRATION_SEED, 0, 0, device)[None]
    actions = torch.zeros(1, frames, c.action_features, device=device)
    cos, sin = rope.for_frames([0], frames)
    x = latents
    for step in range(schedule.steps):  # the chunk sampled as the engine samples it (unguided)
        timesteps = torch.full((1, frames), schedule.timestep(step), device=device)
        flow = model(x, timesteps, actions, context[None], AttnContext(cos=cos, sin=sin), attend)
        clean = schedule.clean_estimate(x, flow.float(), step)
        if step + 1 < schedule.steps:
            x = schedule.renoise(clean, seeded_noise(shape, CALIBRATION_SEED, 0, step + 1, device)[None], step + 1)
    # the cache pass reads the clean chunk, as every cache pass does: the values every context slab
    # holds come from such passes, so v's mean is taken here (on noise its offset differs)
    timesteps = torch.zeros((1, frames), device=device)
    model(clean.to(latents.dtype), timesteps, actions, context[None], AttnContext(cos=cos, sin=sin), attend)
    if seen[0] != layers * (schedule.steps + 1):
        raise RuntimeError(f"calibration saw {seen[0]} self-attention calls, expected {layers * (schedule.steps + 1)}")
    blocks = [cast(Block, block) for block in model.blocks]
    return [KVFp8.from_calibration(b.self_attn.norm_q.weight, b.self_attn.norm_k.weight, c.num_heads, s)
            for b, s in zip(blocks, stats, strict=True)]
