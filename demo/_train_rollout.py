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
2. roll out: the model generates that chunk with the served sampling (``demo.config``: 3 steps,
   unguided since 2026-12-07, the first guided before; the cache pass with context noise; ``RolloutCache``), without gradient, and
   its K/V become the next chunk's context.

The true world under the same actions is the teacher: wherever the model's own past has drifted
(a lost avatar, a faded colour, a grid), the loss pulls the next chunk back toward a real frame.
One optimizer step per rollout; an EMA of the weights is what gets written. Actions: the
trainer's structured random play, and in ``scripted_share`` of the episodes the long-play
evaluation's vigorous script (directions held seconds long), from a random point.

This is the ``regress`` objective. Its flaw: once the self-made context has drifted, the true next
chunk is unpredictable from it and squared error asks for the mean (a blur). The ``dmd`` objective
(``demo._train_dmd``) matches distributions instead; the ``distill`` objective (``demo._train_distill``)
trains a cheaper sampler against the starting model; both share the state and helpers here.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch

from demo._rollout_cache import RolloutCache
from demo._rollout_critics import AdversarialParams, Adversary, Critics, DistillParams, DmdParams, Teacher
from demo._train_dit import encode_video
from demo.autoencoder import DemoEncoder
from demo.conditioning import action_features
from demo.data import Episodes
from demo.errors import DemoError
from engine.attention import AttentionBackend
from engine.config import ModelConfig
from engine.model import CausalDiT
from engine.sampling import Schedule
from engine.text import HashTextEncoder

__all__ = ["RolloutParams", "RolloutState", "StepInputs", "average_decay", "embed_prompts", "finish_step", "horizon_at", "lr_at",
           "regress_loss", "rollout_step", "set_lr", "step_inputs", "true_chunks"]


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
    fresh_share: float = 0.0  # steps whose episodes start from nothing, as a served session does (``true_chunks``)
    checkpoint_every_s: float = 120.0
    seed: int = 0
    objective: str = "regress"  # or "dmd": distribution matching against the starting model; "distill"; "adversarial"
    dmd: DmdParams = field(default_factory=DmdParams)
    distill: DistillParams = field(default_factory=DistillParams)
    adversarial: AdversarialParams = field(default_factory=AdversarialParams)


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
    critics: Critics | None = None  # the dmd objective's real and fake scores
    teacher: Teacher | None = None  # the distill objective's frozen teacher
    adversary: Adversary | None = None  # the adversarial objective's critic

    @property
    def objective(self) -> str:
        if self.critics is not None:
            return "dmd"
        if self.teacher is not None:
            return "distill"
        return "adversarial" if self.adversary is not None else "regress"

    @classmethod
    def start(cls, dit: CausalDiT, text: HashTextEncoder, params: RolloutParams, device: torch.device) -> RolloutState:
        dit, text = copy.deepcopy(dit).to(device).train(), copy.deepcopy(text).to(device).train()
        opt = torch.optim.AdamW([*dit.parameters(), *text.parameters()], lr=params.lr,
                                weight_decay=params.weight_decay, betas=(0.9, 0.99))
        critics = teacher = adversary = None
        if params.objective == "dmd":
            critics = Critics.start(dit, text, params.dmd.fake_lr or params.lr, params.weight_decay, device)
        elif params.objective == "distill":
            teacher = Teacher.start(dit, text, device)
        elif params.objective == "adversarial":
            adversary = Adversary.start(dit.config, params.adversarial, params.lr, device)
        return cls(dit, text, copy.deepcopy(dit).eval(), copy.deepcopy(text).eval(), opt, critics=critics,
                   teacher=teacher, adversary=adversary)

    def state_dict(self) -> dict[str, object]:
        return {"dit": self.dit.state_dict(), "text": self.text.state_dict(), "ema_dit": self.ema_dit.state_dict(),
                "ema_text": self.ema_text.state_dict(), "optimizer": self.optimizer.state_dict(), "step": self.step,
                "seconds": self.seconds, "losses": list(self.losses), "objective": self.objective,
                "critics": None if self.critics is None else self.critics.state_dict(),
                "teacher": None if self.teacher is None else self.teacher.state_dict(),
                "adversary": None if self.adversary is None else self.adversary.state_dict()}

    def load_state_dict(self, state: dict[str, object]) -> None:
        saved = str(state.get("objective", "regress"))
        if saved != self.objective:
            raise DemoError("objective_mismatch", f"the saved state was trained with --objective {saved}, this run "
                                                  f"asks for {self.objective}: pass --objective {saved} to continue "
                                                  "it, or start from its demo.safetensors in a directory without "
                                                  "its rollout_state.pt")
        if self.critics is not None:
            self.critics.load_state_dict(state["critics"])  # type: ignore[arg-type]
        if self.teacher is not None:
            self.teacher.load_state_dict(state["teacher"])  # type: ignore[arg-type]
        if self.adversary is not None:
            self.adversary.load_state_dict(state["adversary"])  # type: ignore[arg-type]
        for name in ("dit", "text", "ema_dit", "ema_text", "optimizer"):
            getattr(self, name).load_state_dict(state[name])
        self.step, self.seconds = int(state["step"]), float(state["seconds"])  # type: ignore[call-overload, arg-type]
        self.losses = list(state["losses"])  # type: ignore[call-overload]


def horizon_at(params: RolloutParams, fraction: float) -> int:
    """Chunks rolled out at budget ``fraction``: min_horizon growing to max_horizon by half the budget."""
    grow = min(1.0, 2.0 * fraction)
    return round(params.min_horizon + (params.max_horizon - params.min_horizon) * grow)


def lr_at(params: RolloutParams, step: int, fraction: float) -> float:
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


@dataclass
class StepInputs:
    """A step's batch as the model reads it: latents, action features, prompts and their embeddings."""

    clean: torch.Tensor  # (B, C, T, h, w)
    actions: torch.Tensor  # (B, T, features)
    prompts: list[list[str]]  # per chunk, per sample
    contexts: list[torch.Tensor]  # per chunk: (B, text_len, dim) from the generator's weights, detached

    @property
    def chunks(self) -> int:
        return len(self.prompts)


def step_inputs(state: RolloutState, episodes: Episodes, encoder: DemoEncoder, config: ModelConfig) -> StepInputs:
    device = episodes.frames.device
    chunks = episodes.frames.shape[1] // config.latent_frames_per_chunk
    prompts = [[row[k] for row in episodes.prompts] for k in range(chunks)]
    return StepInputs(encode_video(encoder, episodes.frames), action_features(episodes.actions, config), prompts,
                      embed_prompts(state.dit, state.text, prompts, device))


def embed_prompts(dit: CausalDiT, text: HashTextEncoder, prompts: list[list[str]], device: torch.device
                  ) -> list[torch.Tensor]:
    """Per chunk the (B, text_len, dim) prompt embeddings of ``prompts``, without gradient."""
    unique = sorted({p for row in prompts for p in row})
    with torch.no_grad():
        table = dit.embed_text(text.encode(unique))  # (P, text_len, dim)
    return [table[torch.tensor([unique.index(p) for p in row], device=device)] for row in prompts]


def true_chunks(params: RolloutParams, window: int, gen: torch.Generator) -> int:
    """How many of a step's first chunks are the true world's, cached as context: ``window``, or 0 in
    ``fresh_share`` of the steps -- the model then makes every chunk from the first on, from nothing,
    as the engine makes a player's (no true world lies behind a served session; without fresh starts
    the trainer never asks for one). Part of the recipe shipped on 2026-12-07 beside the detail term and
    the critic; its share of the gain was not separated from theirs (MODEL_CARD.md). Draws from ``gen``
    only with a share above 0, so runs without fresh starts draw as before."""
    if params.fresh_share <= 0.0:
        return window
    return 0 if float(torch.rand((), generator=gen)) < params.fresh_share else window


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def regress_loss(state: RolloutState, cache: RolloutCache, inputs: StepInputs, k: int, params: RolloutParams,
                 gen: torch.Generator, noise: torch.Generator) -> torch.Tensor:
    """The flow-matching loss of the true chunk ``k``, noised, against the generator's cached context
    (with gradient in the generator's weights and text encoder)."""
    fpc = cache.config.latent_frames_per_chunk
    part = slice(k * fpc, (k + 1) * fpc)
    target = inputs.clean[:, :, part]
    sigma = _sigmas(target.shape[0], cache.schedule, params, gen).to(target.device)
    eps = torch.randn(target.shape, generator=noise, device=target.device)
    s = sigma[:, None, None, None, None]
    prompt = state.dit.embed_text(state.text.encode(inputs.prompts[k]))  # with gradient
    flow = cache.flow((1 - s) * target + s * eps, sigma, inputs.actions[:, part], prompt)
    return (flow - (eps - target)).pow(2).mean()


def average_decay(ema_decay: float, step: int) -> float:
    """The weight average's decay at `step` (0-based, counted over the whole run, resumes included):
    `ema_decay`, but at most (1 + step) / (10 + step) early on. A run's average starts at its start
    weights; with a fixed 0.995 it kept 47% of them after 152 steps (0.995^152), so a distilled
    student written after one GPU call was nearly the untrained one (H200, 2026-12-05: direction
    from rest 0.73, the untrained 2-step sampler's figure). With the ramp the written weights follow
    the last tens of steps of a short run and the last ~1/(1 - ema_decay) of a long one."""
    return min(ema_decay, (1 + step) / (10 + step))


def finish_step(state: RolloutState, params: RolloutParams, loss: float) -> float:
    """Clip, the optimizer step, the average, the count; records ``loss`` and returns it."""
    trained = [*state.dit.parameters(), *state.text.parameters()]
    torch.nn.utils.clip_grad_norm_(trained, 1.0)
    state.optimizer.step()
    with torch.no_grad():
        decay = average_decay(params.ema_decay, state.step)
        averaged = [*state.ema_dit.parameters(), *state.ema_text.parameters()]
        for a, p in zip(averaged, trained, strict=True):
            a.lerp_(p.detach(), 1 - decay)
    state.step += 1
    state.losses.append(loss)
    return loss


def rollout_step(state: RolloutState, episodes: Episodes, encoder: DemoEncoder, config: ModelConfig,
                 attend: AttentionBackend, params: RolloutParams, fraction: float, gen: torch.Generator,
                 noise: torch.Generator) -> float:
    """One step: cache the first ``window_chunks`` true chunks of ``episodes`` (none in a fresh step,
    ``true_chunks``), then per later chunk a training forward on the true chunk against the self-made
    context, then the model's own chunk generated into the cache; one optimizer step. Returns the mean
    loss over the chunks. ``gen`` (CPU) draws sigmas; ``noise`` (on the device) draws every noise tensor."""
    fpc, window = config.latent_frames_per_chunk, true_chunks(params, config.window_chunks, gen)
    inputs = step_inputs(state, episodes, encoder, config)
    chunks = inputs.chunks
    set_lr(state.optimizer, lr_at(params, state.step, fraction))
    state.optimizer.zero_grad(set_to_none=True)
    cache = RolloutCache(state.dit, config, attend, state.dit.new_rope(episodes.frames.device))
    total, n = 0.0, 0
    for k in range(chunks):
        part = slice(k * fpc, (k + 1) * fpc)
        if k < window:
            cache.write(inputs.clean[:, :, part], inputs.actions[:, part], inputs.contexts[k], noise)
            continue
        loss = regress_loss(state, cache, inputs, k, params, gen, noise) / (chunks - window)
        loss.backward()
        total, n = total + float(loss.detach()) * (chunks - window), n + 1
        if k + 1 < chunks:
            cache.generate(inputs.actions[:, part], inputs.contexts[k], noise)
    return finish_step(state, params, total / max(1, n))
