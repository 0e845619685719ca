"""Stage 3 with distribution matching (``--objective dmd``): DMD on the model's own rollouts.

The regress objective pulls each rolled-out chunk toward the TRUE world's next chunk; once the
self-made context has drifted that chunk is unpredictable from it and squared error asks for the
mean, a blur. Here, as in Self-Forcing, the target is instead a distribution: that of the starting
(teacher-forced) model R given the very context the generator G made. Three networks read three KV
caches of the same context frames (the first ``window_chunks`` true chunks, then G's own served
chunks, each written into all three with the same cache-pass noise). Per later chunk:

1. G samples the chunk with the served sampling (``demo.config``'s 3 steps); at an
   exit step drawn uniformly among the steps its denoise runs with gradient and gives x0, its clean
   estimate (the other steps run without gradient; the chain continues from x0 to the served chunk,
   which goes into the caches: the context stays what the engine would make);
2. generator loss: x0 noised to sigma ~ U[0.02, 0.98]; R's clean estimate (guided on the actions as
   served, weight ``real_guidance``) and F's (unguided), both without gradient, give the DMD
   direction (x0_F - x0_R) / mean|x0 - x0_R| (per sample, the normaliser at least 1e-3) and the loss
   0.5 * mse(x0, x0 - direction); optionally plus ``regress_weight`` times the regress term;
3. fake-score loss: F's flow-matching loss on x0 (detached) at a fresh sigma, so F tracks what G
   makes.

Each loss is back-propagated per chunk (cached K/V carry no gradient: one chunk deep). One G step
per rollout; F takes ``fake_steps`` steps: the rollout is repeated that often on the same episodes,
G training only in the last. With F equal to R (and R unguided) the direction is zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from demo._rollout_cache import RolloutCache
from demo._rollout_critics import Critics, DmdParams
from demo._train_rollout import (
    RolloutParams,
    RolloutState,
    StepInputs,
    embed_prompts,
    finish_step,
    lr_at,
    regress_loss,
    set_lr,
    step_inputs,
    true_chunks,
)
from demo.autoencoder import DemoEncoder
from demo.data import Episodes
from demo.errors import DemoError
from engine.attention import AttentionBackend
from engine.config import ModelConfig

__all__ = ["DmdLosses", "dmd_gradient", "dmd_step", "sample_chunk"]


@dataclass(frozen=True)
class DmdLosses:
    generator: float  # the DMD loss (plus the weighted regress term), mean over the rolled-out chunks
    fake: float  # F's flow-matching loss, mean over its updates (nan with fake_steps 0)


def dmd_gradient(x0: torch.Tensor, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
    """The DMD direction for clean estimates ``x0`` (B, ...): (fake - real) / mean|x0 - real|, the
    normaliser per sample and at least 1e-3."""
    dims = tuple(range(1, x0.dim()))
    norm = (x0 - real).abs().mean(dim=dims, keepdim=True).clamp_min(1e-3)
    return (fake - real) / norm


@dataclass
class _Nets:
    """The three caches of one rollout and the prompts each network reads."""

    g: RolloutCache
    r: RolloutCache
    f: RolloutCache
    real_ctx: list[torch.Tensor]
    fake_ctx: list[torch.Tensor]

    def write(self, seen: torch.Tensor, actions: torch.Tensor, inputs: StepInputs, k: int) -> None:
        self.g.write_seen(seen, actions, inputs.contexts[k])
        self.r.write_seen(seen, actions, self.real_ctx[k])
        self.f.write_seen(seen, actions, self.fake_ctx[k])


def _uniform_sigmas(batch: int, dmd: DmdParams, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    return (dmd.min_sigma + (dmd.max_sigma - dmd.min_sigma) * torch.rand(batch, generator=gen)).to(device)


def sample_chunk(cache: RolloutCache, actions: torch.Tensor, context: torch.Tensor, prompt: torch.Tensor | None,
            exit_step: int, noise: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The served sampling of one chunk: (x0, the clean estimate at ``exit_step``, with gradient when
    ``prompt`` (the generator's prompt embedding with gradient) is given; the served chunk)."""
    c, steps = cache.config, cache.schedule.steps
    shape = (actions.shape[0], c.in_dim, c.latent_frames_per_chunk, c.latent_height, c.latent_width)
    x = torch.randn(shape, generator=noise, device=actions.device)
    x0 = served = x
    for step in range(steps):
        grad = prompt is not None and step == exit_step
        with torch.set_grad_enabled(grad):
            estimate = cache.denoise(x, step, actions, prompt if grad and prompt is not None else context)
        if step == exit_step:
            x0 = estimate
        served = estimate.detach()
        if step + 1 < steps:
            x = cache.schedule.renoise(served, torch.randn(shape, generator=noise, device=x.device), step + 1)
    return x0, served


def _generator_loss(x0: torch.Tensor, nets: _Nets, actions: torch.Tensor, k: int, sigma: torch.Tensor,
                    eps: torch.Tensor, guidance: float) -> torch.Tensor:
    with torch.no_grad():
        s = sigma[:, None, None, None, None]
        clean = x0.detach()
        xt = (1 - s) * clean + s * eps
        real = xt - s * nets.r.guided_flow(xt, sigma, actions, nets.real_ctx[k], guidance)
        fake = xt - s * nets.f.flow(xt, sigma, actions, nets.fake_ctx[k])
        target = clean - dmd_gradient(clean, real, fake)
    return 0.5 * (x0 - target).pow(2).mean()


def _fake_loss(critics: Critics, nets: _Nets, x0: torch.Tensor, actions: torch.Tensor, prompts: list[str],
               sigma: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    s = sigma[:, None, None, None, None]
    prompt = critics.fake.embed_text(critics.text.encode(prompts))  # with gradient in F's projection
    flow = nets.f.flow((1 - s) * x0 + s * eps, sigma, actions, prompt)
    return (flow - (eps - x0)).pow(2).mean()


def _rollout(state: RolloutState, critics: Critics, inputs: StepInputs, config: ModelConfig, attend: AttentionBackend,
             params: RolloutParams, gen: torch.Generator, noise: torch.Generator, window: int, train_generator: bool,
             train_fake: bool) -> tuple[float, float]:
    """One rollout over ``inputs`` after its first ``window`` true chunks, back-propagating the
    generator's and/or F's loss per chunk. Returns their means over the rolled-out chunks."""
    dmd, device = params.dmd, inputs.clean.device
    fpc, chunks = config.latent_frames_per_chunk, inputs.chunks
    guidance = config.action_guidance if dmd.real_guidance is None else dmd.real_guidance
    g, r, f = (RolloutCache(dit, config, attend, dit.new_rope(device)) for dit in (state.dit, critics.real, critics.fake))
    nets = _Nets(g, r, f, embed_prompts(critics.real, critics.text, inputs.prompts, device),
                 embed_prompts(critics.fake, critics.text, inputs.prompts, device))
    rolled = chunks - window
    g_total = f_total = 0.0
    for k in range(chunks):
        part = slice(k * fpc, (k + 1) * fpc)
        actions = inputs.actions[:, part]
        if k < window:
            nets.write(nets.g.seen(inputs.clean[:, :, part], noise), actions, inputs, k)
            continue
        exit_step = int(torch.randint(nets.g.schedule.steps, (1,), generator=gen))
        prompt = state.dit.embed_text(state.text.encode(inputs.prompts[k])) if train_generator else None
        x0, served = sample_chunk(nets.g, actions, inputs.contexts[k], prompt, exit_step, noise)
        if train_generator:
            sigma = _uniform_sigmas(x0.shape[0], dmd, gen, device)
            eps = torch.randn(x0.shape, generator=noise, device=device)
            loss = _generator_loss(x0, nets, actions, k, sigma, eps, guidance)
            if dmd.regress_weight > 0:
                loss = loss + dmd.regress_weight * regress_loss(state, nets.g, inputs, k, params, gen, noise)
            (loss / rolled).backward()
            g_total += float(loss.detach())
        if train_fake:
            sigma = _uniform_sigmas(x0.shape[0], dmd, gen, device)
            eps = torch.randn(x0.shape, generator=noise, device=device)
            fake = _fake_loss(critics, nets, x0.detach(), actions, inputs.prompts[k], sigma, eps)
            (fake / rolled).backward()
            f_total += float(fake.detach())
        if k + 1 < chunks:
            nets.write(nets.g.seen(served, noise), actions, inputs, k)
    return g_total / max(1, rolled), f_total / max(1, rolled)


def dmd_step(state: RolloutState, episodes: Episodes, encoder: DemoEncoder, config: ModelConfig,
             attend: AttentionBackend, params: RolloutParams, fraction: float, gen: torch.Generator,
             noise: torch.Generator) -> DmdLosses:
    """One DMD step on ``episodes`` (``fake_steps`` rollouts, F stepping after each, G after the last;
    one rollout without F updates at fake_steps 0). ``gen`` (CPU) draws exit steps and sigmas;
    ``noise`` (on the device) draws every noise tensor."""
    critics = state.critics
    if critics is None:
        raise DemoError("no_critics", "a dmd step needs a state started with objective 'dmd' (RolloutParams)")
    dmd = params.dmd
    inputs = step_inputs(state, episodes, encoder, config)
    lr = lr_at(params, state.step, fraction)
    set_lr(state.optimizer, lr)
    set_lr(critics.optimizer, lr * (dmd.fake_lr or params.lr) / params.lr)
    state.optimizer.zero_grad(set_to_none=True)
    g_loss, f_losses = 0.0, []
    window = true_chunks(params, config.window_chunks, gen)  # the same in every round
    for round_ in range(max(1, dmd.fake_steps)):
        critics.optimizer.zero_grad(set_to_none=True)
        last = round_ == max(1, dmd.fake_steps) - 1
        g_loss_round, f_loss = _rollout(state, critics, inputs, config, attend, params, gen, noise, window,
                                        train_generator=last, train_fake=dmd.fake_steps > 0)
        g_loss = g_loss_round if last else g_loss
        if dmd.fake_steps > 0:
            torch.nn.utils.clip_grad_norm_(critics.fake.parameters(), 1.0)
            critics.optimizer.step()
            f_losses.append(f_loss)
    fake = sum(f_losses) / len(f_losses) if f_losses else math.nan
    if f_losses:
        critics.losses.append(fake)
    return DmdLosses(finish_step(state, params, g_loss), fake)
