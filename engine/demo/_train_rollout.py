"""Stage 3: training on the model's own rollouts, with the procedural world as teacher.

Self-Forcing's point is that a causal video model must learn from the context it makes itself:
trained only on true context (teacher forcing), its small errors compound over a long rollout
into patterns it has never seen (rows of trees, stripes; the avatar dissolves). Here each step
takes B episodes of the true world, W + K chunks long (K, the horizon, grows over the run). The
first W true chunks go into a KV cache as context, exactly as the engine would hold them. Then,
chunk by chunk for K chunks:

1. train: the true next chunk, noised to a sampled sigma, is denoised by the model reading the
   cached window -- which from the second chunk on holds what the model generated itself -- and
   the flow-matching loss against the world's true chunk is back-propagated at once (the cached
   K/V are detached, so the graph is one chunk deep);
2. roll out: the model generates that chunk with the served sampling (3 steps, the first guided
   on the actions, the cache pass with context noise; ``RolloutCache``), without gradient, and
   its K/V become the next chunk's context.

The true world under the same actions is the teacher: wherever the model's own past has drifted
(a lost avatar, a faded colour, a grid), the loss pulls the next chunk back toward a real frame.
One optimizer step per rollout; an EMA of the weights is what gets written. Actions: the
trainer's structured random play, and in ``scripted_share`` of the episodes the long-play
evaluation's vigorous script (directions held seconds long), from a random point.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch

from engine.attention import AttentionBackend
from engine.config import ModelConfig
from engine.demo._rollout_cache import RolloutCache
from engine.demo._train_dit import encode_video
from engine.demo.autoencoder import DemoEncoder
from engine.demo.conditioning import action_features
from engine.demo.data import Episodes
from engine.model import CausalDiT
from engine.sampling import Schedule
from engine.text import HashTextEncoder

__all__ = ["RolloutParams", "RolloutState", "horizon_at", "rollout_step"]


@dataclass(frozen=True)
class RolloutParams:
    batch: int = 48  # episodes per step
    min_horizon: int = 4  # chunks rolled out per step at the start ...
    max_horizon: int = 24  # ... growing linearly to this (6 s at 16 fps) over the first half of the budget
    lr: float = 2e-4
    warmup_steps: int = 30
    min_lr_fraction: float = 0.2
    weight_decay: float = 0.01
    ema_decay: float = 0.995
    schedule_probability: float = 0.7  # a target chunk's sigma is one of the sampler's ...
    first_sigma_weight: float = 0.5  # ... this often the first (pure noise: it decides the motion)
    scripted_share: float = 0.5  # episodes whose actions follow the long-play script
    checkpoint_every_s: float = 120.0
    seed: int = 0


@dataclass
class RolloutState:
    """Everything a resumed run needs: weights, their average, the optimizer, the step and the clock."""

    dit: CausalDiT
    text: HashTextEncoder
    ema_dit: CausalDiT
    ema_text: HashTextEncoder
    optimizer: torch.optim.Optimizer
    step: int = 0
    seconds: float = 0.0  # training seconds spent before this process (resumed runs)
    losses: list[float] = field(default_factory=list)

    @classmethod
    def start(cls, dit: CausalDiT, text: HashTextEncoder, params: RolloutParams, device: torch.device) -> RolloutState:
        dit, text = copy.deepcopy(dit).to(device).train(), copy.deepcopy(text).to(device).train()
        opt = torch.optim.AdamW([*dit.parameters(), *text.parameters()], lr=params.lr,
                                weight_decay=params.weight_decay, betas=(0.9, 0.99))
        return cls(dit, text, copy.deepcopy(dit).eval(), copy.deepcopy(text).eval(), opt)

    def state_dict(self) -> dict[str, object]:
        return {"dit": self.dit.state_dict(), "text": self.text.state_dict(), "ema_dit": self.ema_dit.state_dict(),
                "ema_text": self.ema_text.state_dict(), "optimizer": self.optimizer.state_dict(), "step": self.step,
                "seconds": self.seconds, "losses": list(self.losses)}

    def load_state_dict(self, state: dict[str, object]) -> None:
        for name in ("dit", "text", "ema_dit", "ema_text", "optimizer"):
            getattr(self, name).load_state_dict(state[name])
        self.step, self.seconds = int(state["step"]), float(state["seconds"])  # type: ignore[call-overload, arg-type]
        self.losses = list(state["losses"])  # type: ignore[call-overload]


def horizon_at(params: RolloutParams, fraction: float) -> int:
    """Chunks rolled out at budget ``fraction``: min_horizon growing to max_horizon by half the budget."""
    grow = min(1.0, 2.0 * fraction)
    return round(params.min_horizon + (params.max_horizon - params.min_horizon) * grow)


def _lr(params: RolloutParams, step: int, fraction: float) -> float:
    if step < params.warmup_steps:
        return params.lr * (step + 1) / params.warmup_steps
    floor = params.min_lr_fraction
    return params.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * fraction)))


def _sigmas(batch: int, schedule: Schedule, params: RolloutParams, gen: torch.Generator) -> torch.Tensor:
    """(B,) noise levels of the target chunks: mostly the sampler's own sigmas, else logit-normal."""
    n = schedule.steps
    weights = torch.tensor([params.first_sigma_weight] + [(1 - params.first_sigma_weight) / max(1, n - 1)] * (n - 1))
    scheduled = torch.tensor(schedule.sigmas)[torch.multinomial(weights[:n], batch, replacement=True, generator=gen)]
    other = torch.sigmoid(torch.randn(batch, generator=gen) + 0.5)
    return torch.where(torch.rand(batch, generator=gen) < params.schedule_probability, scheduled, other)


def rollout_step(state: RolloutState, episodes: Episodes, encoder: DemoEncoder, config: ModelConfig,
                 attend: AttentionBackend, params: RolloutParams, fraction: float, gen: torch.Generator,
                 noise: torch.Generator) -> float:
    """One step: cache the first ``window_chunks`` true chunks of ``episodes``, then per later chunk a
    training forward on the true chunk against the self-made context, then the model's own chunk
    generated into the cache; one optimizer step. Returns the mean loss over the chunks.
    ``gen`` (CPU) draws sigmas; ``noise`` (on the device) draws every noise tensor."""
    device = episodes.frames.device
    fpc, window = config.latent_frames_per_chunk, config.window_chunks
    chunks = episodes.frames.shape[1] // fpc
    clean = encode_video(encoder, episodes.frames)  # (B, C, T, h, w)
    actions = action_features(episodes.actions, config)  # (B, T, features)
    unique = sorted({p for row in episodes.prompts for p in row})
    with torch.no_grad():
        table = state.dit.embed_text(state.text.encode(unique))  # (P, text_len, dim), detached
    contexts = [table[torch.tensor([unique.index(row[k]) for row in episodes.prompts], device=device)]
                for k in range(chunks)]
    for group in state.optimizer.param_groups:
        group["lr"] = _lr(params, state.step, fraction)
    state.optimizer.zero_grad(set_to_none=True)
    cache = RolloutCache(state.dit, config, attend, state.dit.new_rope(device))
    schedule = Schedule.from_config(config)
    total, n = 0.0, 0
    for k in range(chunks):
        part = slice(k * fpc, (k + 1) * fpc)
        if k < window:
            cache.write(clean[:, :, part], actions[:, part], contexts[k], noise)
            continue
        sigma = _sigmas(clean.shape[0], schedule, params, gen).to(device)
        eps = torch.randn(clean[:, :, part].shape, generator=noise, device=device)
        s = sigma[:, None, None, None, None]
        x = (1 - s) * clean[:, :, part] + s * eps
        prompt = state.dit.embed_text(state.text.encode([row[k] for row in episodes.prompts]))  # with gradient
        flow = cache.flow(x, sigma, actions[:, part], prompt)
        loss = (flow - (eps - clean[:, :, part])).pow(2).mean() / (chunks - window)
        loss.backward()
        total, n = total + float(loss.detach()) * (chunks - window), n + 1
        if k + 1 < chunks:
            cache.generate(actions[:, part], contexts[k], noise)
    trained = [*state.dit.parameters(), *state.text.parameters()]
    torch.nn.utils.clip_grad_norm_(trained, 1.0)
    state.optimizer.step()
    with torch.no_grad():
        decay = params.ema_decay  # the run starts from trained weights: the average is warm
        averaged = [*state.ema_dit.parameters(), *state.ema_text.parameters()]
        for a, p in zip(averaged, trained, strict=True):
            a.lerp_(p.detach(), 1 - decay)
    state.step += 1
    mean = total / max(1, n)
    state.losses.append(mean)
    return mean
