"""Stage 2: the causal DiT on autoencoder latents, trained for chunked rollout.

Every chunk of a training sequence gets its own noise level under the block-causal window
mask. Clean chunks (timestep 0, no loss) are exactly what the engine's cache pass writes as
context; most sequences are laid out as at inference (each noisy target chunk sees a clean
window), the rest as diffusion forcing (independent levels, noisy context) for robustness.
Some clean chunks carry a little extra noise while still labelled clean, so the model
tolerates imperfect context. Noisy chunks learn the flow (noise - clean) by flow matching; most
of them sit exactly at the engine's few-step sigmas, the pure-noise one most often, since that
step decides the motion. Later in training, some clean context chunks are
replaced by the model's own clean estimates from a first, gradient-free pass (made at the
sampler's last sigmas): the context then carries the model's own errors, as in a rollout.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from demo._progress import Budget, LossLog, StageClock
from demo.autoencoder import DemoEncoder
from demo.conditioning import action_features, chunked_kernels, prompt_context
from demo.data import EpisodeSource
from engine.attention import AttentionBackend
from engine.config import ModelConfig
from engine.model import CausalDiT
from engine.rope import RopeTable
from engine.sampling import Schedule
from engine.text import HashTextEncoder

__all__ = ["Checkpoint", "DiTTrainParams", "encode_video", "sample_noise_levels", "train_dit"]

Checkpoint = Callable[[CausalDiT, HashTextEncoder, int], None]


@dataclass(frozen=True)
class DiTTrainParams:
    batch: int = 64  # sequences per step
    chunks: int = 6  # chunks per sequence
    lr: float = 8e-4
    min_lr_fraction: float = 0.1
    warmup_steps: int = 150
    weight_decay: float = 0.01
    ema_decay: float = 0.998
    layout_weights: tuple[float, float, float] = (0.6, 0.15, 0.25)  # rollout, start, forcing (see _layout)
    clean_probability: float = 0.3  # forcing layout: a chunk is clean context (t = 0, no loss)
    clean_noise_probability: float = 0.8  # clean context chunks carrying some noise ...
    clean_noise_max: float = 0.4  # ... of std uniform up to this (serving adds cache_context_noise = 0.3)
    schedule_probability: float = 0.6  # a noisy chunk sits exactly at one of the sampler's sigmas ...
    first_sigma_weight: float = 0.4  # ... and this often at the first, pure-noise one (it sets the motion)
    logit_mean: float = 0.5  # other noisy chunks: sigmoid(N(logit_mean, 1)), leaning to high noise
    self_context_after: float = 0.3  # budget fraction after which self-made context starts
    self_context_probability: float = 0.5  # share of steps (after that) with a self-made context pass
    self_context_sigmas: int = 2  # the first pass estimates from one of the sampler's last sigmas
    checkpoint_every_s: float = 180.0
    seed: int = 0


def _schedule_weights(n: int, first: float) -> torch.Tensor:
    """Sampling weights over the sampler's sigmas: ``first`` on the first (pure noise) step."""
    rest = (1.0 - first) / max(1, n - 1)
    return torch.tensor([first] + [rest] * (n - 1)) if n > 1 else torch.ones(1)


def _layout(batch: int, chunks: int, window: int, params: DiTTrainParams, gen: torch.Generator) -> torch.Tensor:
    """Which chunks are clean context (True) per sequence (B, n).

    Rollout layout: every (window + 1)-th chunk is a target whose window (the chunks before it)
    is clean, as at inference. Start layout: the same shifted so chunk 0 is a target without any
    context (a session's first chunk). Forcing layout: each chunk clean with clean_probability
    (diffusion forcing: noisy context)."""
    k = torch.arange(chunks)
    period = window + 1
    rollout = (k % period) != window
    start = (k % period) != 0
    forcing = torch.rand(batch, chunks, generator=gen) < params.clean_probability
    pick = torch.multinomial(torch.tensor(params.layout_weights), batch, replacement=True, generator=gen)
    return torch.where((pick == 0)[:, None], rollout[None], torch.where((pick == 1)[:, None], start[None], forcing))


def sample_noise_levels(batch: int, chunks: int, window: int, sampler_sigmas: tuple[float, ...],
                        params: DiTTrainParams, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per chunk: sigma (B, n) in [0, 1], loss weight (B, n) 0/1, extra context noise std (B, n)."""
    clean = _layout(batch, chunks, window, params, gen)
    on_schedule = torch.rand(batch, chunks, generator=gen) < params.schedule_probability
    weights = _schedule_weights(len(sampler_sigmas), params.first_sigma_weight)
    pick = torch.multinomial(weights, batch * chunks, replacement=True, generator=gen).view(batch, chunks)
    scheduled = torch.tensor(sampler_sigmas)[pick]
    logit_normal = torch.sigmoid(torch.randn(batch, chunks, generator=gen) + params.logit_mean)
    sigma = torch.where(on_schedule, scheduled, logit_normal)
    sigma = torch.where(clean, torch.zeros_like(sigma), sigma)
    noisy_context = clean & (torch.rand(batch, chunks, generator=gen) < params.clean_noise_probability)
    extra = torch.where(noisy_context, torch.rand(batch, chunks, generator=gen) * params.clean_noise_max,
                        torch.zeros_like(sigma))
    return sigma, (~clean).float(), extra


def _lr(params: DiTTrainParams, step: int, frac: float) -> float:
    if step < params.warmup_steps:
        return params.lr * (step + 1) / params.warmup_steps
    floor = params.min_lr_fraction
    return params.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * frac)))


@torch.no_grad()
def encode_video(encoder: DemoEncoder, frames: torch.Tensor) -> torch.Tensor:
    """(B, T, 3, H, W) in [-1, 1] -> normalised latents (B, C, T, h, w) float32."""
    b, t = frames.shape[:2]
    with torch.autocast(frames.device.type, dtype=torch.bfloat16, enabled=frames.device.type == "cuda"):
        z = encoder(frames.flatten(0, 1))
    return z.float().view(b, t, *z.shape[1:]).transpose(1, 2).contiguous()


def _per_frame(v: torch.Tensor, fpc: int) -> torch.Tensor:
    """(B, n) per chunk -> (B, 1, T, 1, 1) to broadcast over latents (B, C, T, h, w)."""
    return v.repeat_interleave(fpc, dim=1)[:, None, :, None, None]


def _embed_prompts(dit: CausalDiT, text: HashTextEncoder, prompts: list[list[str]], chunks: int) -> torch.Tensor:
    """One prompt per chunk -> context (B, chunks * text_len, dim); each distinct prompt encoded once."""
    flat = [p for row in prompts for p in row]
    unique = sorted(set(flat))
    index = torch.tensor([unique.index(p) for p in flat], device=text.tokens.weight.device)
    return prompt_context(dit.embed_text(text.encode(unique))[index], chunks)


class _Forward:
    """The training-time full-sequence forward of one model."""

    def __init__(self, dit: CausalDiT, rope: RopeTable, attend: AttentionBackend, config: ModelConfig) -> None:
        self.dit, self.rope, self.attend, self.config = dit, rope, attend, config

    def __call__(self, x: torch.Tensor, sigma: torch.Tensor, actions: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        t = sigma.repeat_interleave(self.config.latent_frames_per_chunk, dim=1) * self.config.num_train_timesteps
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=x.device.type == "cuda"):
            flow = self.dit.forward_full(x, t, actions, context, self.rope, self.attend)
        return flow.float()


@torch.no_grad()
def _self_context(forward: _Forward, clean: torch.Tensor, weight: torch.Tensor, actions: torch.Tensor,
                  context: torch.Tensor, sampler_sigmas: tuple[float, ...], params: DiTTrainParams,
                  gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Model-made clean estimates for some context chunks: (latents, which chunks (B, n) bool)."""
    b, n = weight.shape
    fpc = forward.config.latent_frames_per_chunk
    chosen = (weight == 0) & (torch.rand(b, n, generator=gen) < 0.5).to(weight.device)
    last = torch.tensor(sampler_sigmas[-params.self_context_sigmas:])
    sigma = last[torch.randint(0, len(last), (b, n), generator=gen)].to(weight.device) * chosen
    x = (1 - _per_frame(sigma, fpc)) * clean + _per_frame(sigma, fpc) * torch.randn_like(clean)
    estimate = x - _per_frame(sigma, fpc) * forward(x, sigma, actions, context)
    return torch.where(_per_frame(chosen, fpc), estimate, clean), chosen


def train_dit(source: EpisodeSource, encoder: DemoEncoder, config: ModelConfig, budget: Budget,
              params: DiTTrainParams, log: LossLog, checkpoint: Checkpoint | None = None,
              start: tuple[CausalDiT, HashTextEncoder] | None = None,
              clock: StageClock | None = None) -> tuple[CausalDiT, HashTextEncoder]:
    """Train until the budget is spent; returns the EMA DiT and text encoder. ``start``: weights to
    train on from (a resumed run; both the trained and the averaged copy begin there). ``clock``
    collects the seconds spent per stage of a step (render, encode, forward, backward, ...)."""
    device = source.device
    clock = clock if clock is not None else StageClock(device, "dit")
    if start is None:
        dit = CausalDiT(config)
        dit.init_random(params.seed)
        text = HashTextEncoder(config)
        text.init_random()
    else:
        dit, text = copy.deepcopy(start[0]), copy.deepcopy(start[1])
    dit, text = dit.to(device).train(), text.to(device).train()
    ema_dit, ema_text = copy.deepcopy(dit).eval(), copy.deepcopy(text).eval()
    trained = [*dit.parameters(), *text.parameters()]
    averaged = [*ema_dit.parameters(), *ema_text.parameters()]
    opt = torch.optim.AdamW(trained, lr=params.lr, weight_decay=params.weight_decay, betas=(0.9, 0.99))
    dit.kernels = chunked_kernels(params.chunks)  # one prompt per chunk (training copy only)
    forward = _Forward(dit, dit.new_rope(device), AttentionBackend.create("sdpa", device), config)
    sampler_sigmas = Schedule.from_config(config).sigmas
    gen = torch.Generator().manual_seed(params.seed + 17)
    fpc = config.latent_frames_per_chunk
    last_checkpoint = time.monotonic()
    while not budget.done():
        for group in opt.param_groups:
            group["lr"] = _lr(params, budget.step, budget.fraction())
        with clock.stage("render"):
            episodes = source.sample(params.batch, params.chunks * fpc, fpc)
        with clock.stage("encode"):
            clean = encode_video(encoder, episodes.frames)  # (B, C, T, h, w)
        with clock.stage("conditioning"):
            sigma, weight, extra = (v.to(device) for v in sample_noise_levels(
                params.batch, params.chunks, config.window_chunks, sampler_sigmas, params, gen))
            actions = action_features(episodes.actions, config)
            context = _embed_prompts(dit, text, episodes.prompts, params.chunks)
        source_latents = clean
        if budget.fraction() >= params.self_context_after and float(
                torch.rand(1, generator=gen)) < params.self_context_probability:
            with clock.stage("self_context"):
                source_latents, chosen = _self_context(forward, clean, weight, actions, context.detach(),
                                                       sampler_sigmas, params, gen)
            extra = extra * (~chosen)
        with clock.stage("forward"):
            noise = torch.randn_like(clean)
            x = (1 - _per_frame(sigma, fpc)) * source_latents + _per_frame(sigma, fpc) * noise
            x = x + _per_frame(extra, fpc) * torch.randn_like(x)
            flow = forward(x, sigma, actions, context)
            err = (flow - (noise - clean)).pow(2).mean(dim=(1, 3, 4))  # (B, T)
            per_chunk = err.view(params.batch, params.chunks, fpc).mean(dim=2)
            loss = (per_chunk * weight).sum() / weight.sum().clamp_min(1.0)
        with clock.stage("backward"):
            opt.zero_grad(set_to_none=True)
            loss.backward()
        with clock.stage("optimizer"):
            grad_norm = torch.nn.utils.clip_grad_norm_(trained, 1.0)
            opt.step()
        with torch.no_grad(), clock.stage("ema"):
            warming = min(params.ema_decay, (1 + budget.step) / (10 + budget.step))
            decay = params.ema_decay if start is not None else warming  # a resumed average is already warm
            for a, p in zip(averaged, trained, strict=True):
                a.lerp_(p.detach(), 1 - decay)
        value = float(loss.detach())
        log.add("DiT flow-matching loss (noisy chunks)", value)
        budget.tick(value, f"grad {float(grad_norm):.3f}")
        if checkpoint is not None and time.monotonic() - last_checkpoint >= params.checkpoint_every_s:
            checkpoint(ema_dit, ema_text, budget.step)
            last_checkpoint = time.monotonic()
    return ema_dit, ema_text
