"""A batched rollout of the DiT for training: the served sampling with a KV cache of its own.

Every sample of the batch sits at the same chunk index, so one list of per-chunk K/V per layer
serves the whole batch. Chunk by chunk it does what the engine's phase runner does for a session:
the denoise steps at the schedule's sigmas (the first ``action_guidance_steps`` guided on the
actions: flow(no input) + g * (flow(actions) - flow(no input))), each reading the window of
cached chunks before it (none before a sequence's first chunk: a served session's start), then
the cache pass at t = 0 over the clean latents plus noise of std ``cache_context_noise`` that
writes the chunk's K/V. Noise comes from one torch generator on the device (the engine seeds its
noise per session; the distribution is the same).
"""

from __future__ import annotations

import torch

from engine.attention import AttentionBackend
from engine.config import ModelConfig
from engine.model import AttnContext, CausalDiT
from engine.rope import RopeTable
from engine.sampling import Schedule

__all__ = ["RolloutCache"]


class RolloutCache:
    """The K/V of the last ``window_chunks`` chunks of a batch of sequences (K/V carry no gradient)."""

    def __init__(self, dit: CausalDiT, config: ModelConfig, attend: AttentionBackend, rope: RopeTable) -> None:
        self.dit, self.config, self.attend, self.rope = dit, config, attend, rope
        self.schedule = Schedule.from_config(config)
        self.chunks: list[list[tuple[torch.Tensor, torch.Tensor]]] = []  # per chunk: per layer (K, V)
        self.next_chunk = 0

    def _context(self, batch: int, write: list[tuple[torch.Tensor, torch.Tensor]] | None) -> AttnContext:
        fpc = self.config.latent_frames_per_chunk
        cos, sin = self.rope.for_frames([self.next_chunk * fpc] * batch, fpc)
        window = self.chunks[-self.config.window_chunks:] if self.config.window_chunks else []

        def read(layer: int, slabs: list[list[int]], k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            reps = k.shape[0] // window[0][layer][0].shape[0]  # a guided pass runs the batch twice
            ks = [k] + [chunk[layer][0].repeat(reps, 1, 1, 1) for chunk in window]
            vs = [v] + [chunk[layer][1].repeat(reps, 1, 1, 1) for chunk in window]
            return torch.cat(ks, dim=1), torch.cat(vs, dim=1)

        ctx = AttnContext(cos=cos, sin=sin, contexts=[list(range(len(window)))] * batch, read=read)
        if write is not None:
            ctx.write = lambda layer, k, v, centre: write.append((k.detach(), v.detach()))
        return ctx

    def flow(self, x: torch.Tensor, sigma: torch.Tensor, actions: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """The model's flow for the next chunk ``x`` (B, C, F, h, w) at per-sample ``sigma`` (B,),
        reading the cached window; differentiable in the model's weights (the training forward)."""
        b, fpc = x.shape[0], self.config.latent_frames_per_chunk
        t = (sigma * self.config.num_train_timesteps)[:, None].expand(b, fpc)
        ctx = self._context(b, None)
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=x.device.type == "cuda"):
            out = self.dit(x, t, actions, context, ctx, self.attend)
        return out.float()  # type: ignore[no-any-return]

    def guided_flow(self, x: torch.Tensor, sigma: torch.Tensor, actions: torch.Tensor, context: torch.Tensor,
                    guidance: float) -> torch.Tensor:
        """The flow guided on the actions with weight ``guidance``: flow(no actions) + g * (flow(actions) -
        flow(no actions)), one pass at double batch; at ``guidance`` 1 the plain flow (one pass)."""
        if guidance == 1.0:
            return self.flow(x, sigma, actions, context)
        both = self.flow(torch.cat([x, x]), torch.cat([sigma, sigma]), torch.cat([actions, torch.zeros_like(actions)]),
                         torch.cat([context, context]))
        acted, still = both.chunk(2)
        return still + guidance * (acted - still)

    def denoise(self, x: torch.Tensor, step: int, actions: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """The served denoise step ``step`` of ``x`` at that step's sigma: its clean estimate, guided on
        the actions in the first ``action_guidance_steps`` steps; differentiable when grad is enabled."""
        c = self.config
        sigma = torch.full((x.shape[0],), self.schedule.sigmas[step], device=x.device)
        guidance = c.action_guidance if step < c.action_guidance_steps else 1.0
        return self.schedule.clean_estimate(x, self.guided_flow(x, sigma, actions, context, guidance), step)

    @torch.no_grad()
    def write(self, clean: torch.Tensor, actions: torch.Tensor, context: torch.Tensor, gen: torch.Generator) -> None:
        """The cache pass: append the K/V of the chunk ``clean`` (B, C, F, h, w) made under ``actions``."""
        self.write_seen(self.seen(clean, gen), actions, context)

    def seen(self, clean: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """What the cache pass reads of ``clean``: plus noise of std ``cache_context_noise``."""
        return clean + self.config.cache_context_noise * torch.randn(clean.shape, generator=gen, device=clean.device)

    @torch.no_grad()
    def write_seen(self, seen: torch.Tensor, actions: torch.Tensor, context: torch.Tensor) -> None:
        """The cache pass over latents already noised (``seen``): several caches of one rollout can
        then read the very same context."""
        b, fpc = seen.shape[0], self.config.latent_frames_per_chunk
        written: list[tuple[torch.Tensor, torch.Tensor]] = []
        t = torch.zeros(b, fpc, device=seen.device)
        with torch.autocast(seen.device.type, dtype=torch.bfloat16, enabled=seen.device.type == "cuda"):
            self.dit(seen, t, actions, context, self._context(b, written), self.attend)
        self.chunks.append(written)
        self.chunks = self.chunks[-max(1, self.config.window_chunks):]
        self.next_chunk += 1

    @torch.no_grad()
    def generate(self, actions: torch.Tensor, context: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Sample the next chunk as served (B, C, F, h, w) and write it to the cache."""
        c = self.config
        shape = (actions.shape[0], c.in_dim, c.latent_frames_per_chunk, c.latent_height, c.latent_width)
        x = torch.randn(shape, generator=gen, device=actions.device)
        clean = x
        for step in range(self.schedule.steps):
            clean = self.denoise(x, step, actions, context)
            if step + 1 < self.schedule.steps:
                x = self.schedule.renoise(clean, torch.randn(shape, generator=gen, device=x.device), step + 1)
        self.write(clean, actions, context, gen)
        return clean
