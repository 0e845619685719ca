"""Stage 3 against the blur (``--objective adversarial``): the regress objective plus a critic.

The regress objective keeps the avatar and ends the grids (H200, 2026-12-01: avatar 0.998,
collapse-free 0.977 over five minutes) but once the self-made context has drifted the true next
chunk is unpredictable from it and squared error asks for the mean: plain fields of the theme's
colours, no trees, no lakes (texture within bound 0.010). Matching the starting model's
distribution instead (``dmd``, ``distill``) brought its grids back: that teacher drifts. Here the
true world stays the only teacher, and a critic says what the mean is not:

1. G samples the chunk with the served sampling (``demo.config``'s 3 steps); its last
   denoise pass runs with gradient and gives x0, the served chunk, which becomes the context
   (``demo._train_dmd.sample_chunk``: what the engine would make). Only the last pass: the detail
   term asks for a sample's detail, which the first pass, from pure noise, cannot give and the
   regress term there asks it not to (its optimum at sigma 1 is the mean). A first CPU try with the
   exit drawn among the steps, as DMD does, started at a loss of 6.8, the regress term alone 0.3-0.5;
2. generator loss: ``weight`` * -critic(x0, actions) (hinge), plus ``regress_weight`` times the
   regress term (the true chunk, noised, denoised reading the self-made context);
3. critic loss: hinge, the true world's chunk k under the same actions as real and x0 (detached) as
   made: relu(1 - critic(true)) + relu(1 + critic(x0)), mean over patches and samples.

Optionally (``detail_weight``) the generator's loss also matches the spatial power spectrum of x0
to the true chunks' (``detail_loss``). The shipped model's chunks lose detail chunk after chunk while
the world keeps it (latent detail from 0.96 to 0.65 of the world's over 12 generated chunks,
``python -m demo.detail_decay``): the blur compounds through the context. Matching the detail's
energy (beside the critic at 0.1) was tried first, on a CPU (2026-12-07): it gave the energy back as
a regular grid of trees within 34 steps, the other failure of this model. The spectrum per frequency
sees both: a blur lacks power at the high frequencies, a grid puts it into a few. The term is set at
the batch level, not per episode, so a drifted episode is not asked for the detail of a place it no
longer shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from demo._rollout_cache import RolloutCache
from demo._rollout_critics import LatentCritic
from demo._train_dmd import sample_chunk
from demo._train_rollout import (
    RolloutParams,
    RolloutState,
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

__all__ = ["PEAK_RATIO", "AdversarialLosses", "adversarial_step", "critic_loss", "detail_energy", "detail_loss",
           "generator_term", "latent_spectrum"]


@dataclass(frozen=True)
class AdversarialLosses:
    generator: float  # weight * -critic(x0) plus the weighted regress and detail terms, mean over the rolled-out chunks
    critic: float  # the critic's hinge loss, mean over the rolled-out chunks (2.0 where it cannot tell)


def generator_term(critic: LatentCritic, made: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """-critic(made): lower where the critic takes the generator's chunk for the true world's.
    The critic's weights get no gradient from it."""
    critic.requires_grad_(False)
    try:
        return -critic(made, actions).mean()
    finally:
        critic.requires_grad_(True)


def critic_loss(critic: LatentCritic, true: torch.Tensor, made: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """The hinge loss of the critic on the world's chunk ``true`` and the generator's ``made`` (detached)."""
    real = critic(true, actions)
    fake = critic(made.detach(), actions)
    return torch.relu(1.0 - real).mean() + torch.relu(1.0 + fake).mean()


def detail_energy(latents: torch.Tensor) -> torch.Tensor:
    """(C,) per latent channel of ``latents`` (B, C, F, h, w): the RMS of the differences between
    horizontally and vertically neighbouring cells, over the batch, the frames and the positions."""
    dx = latents[..., :, 1:] - latents[..., :, :-1]
    dy = latents[..., 1:, :] - latents[..., :-1, :]
    dims = (0, 2, 3, 4)
    return ((dx.pow(2).mean(dim=dims) + dy.pow(2).mean(dim=dims)) / 2).sqrt()


def latent_spectrum(latents: torch.Tensor, hide_centre: int = 0) -> torch.Tensor:
    """(C, h, w // 2 + 1) the power of each spatial frequency per latent channel of ``latents``
    (B, C, F, h, w), each frame's mean removed, averaged over the batch and the frames.
    ``hide_centre``: the centre square of that many cells a side left out -- the avatar's place, so
    that the spectrum is the ground's: the mean is taken over the other cells, and the square is
    set to zero after it is removed."""
    x = latents.float()
    if hide_centre <= 0:
        centred = x - x.mean(dim=(-2, -1), keepdim=True)
    else:
        h, w = x.shape[-2:]
        top, left = (h - hide_centre) // 2, (w - hide_centre) // 2
        keep = torch.ones(h, w, device=x.device)
        keep[top:top + hide_centre, left:left + hide_centre] = 0.0
        centred = (x - (x * keep).sum(dim=(-2, -1), keepdim=True) / keep.sum()) * keep
    return torch.fft.rfft2(centred, norm="ortho").abs().pow(2).mean(dim=(0, 2))


PEAK_RATIO = 2.0  # a frequency with this many times the world's power counts as a peak


def detail_loss(made: torch.Tensor, true: torch.Tensor, hide_centre: int = 0) -> torch.Tensor:
    """How far ``made``'s spatial spectrum lies from ``true``'s (detached): per channel and frequency
    r = log(power made / power true); the mean of r^2 (a blur: r < 0 at the high frequencies) plus,
    per channel, the sum over frequencies of (r - log PEAK_RATIO)^2 where r exceeds it (a grid: a
    few frequencies far above the world's, which a mean over all of them would hide).
    ``hide_centre``: both spectra without the centre square (``latent_spectrum``): the term then
    reads the ground only, and a second copy of the avatar near the centre adds nothing to it."""
    r = (latent_spectrum(made, hide_centre).clamp_min(1e-6).log()
         - latent_spectrum(true.detach(), hide_centre).clamp_min(1e-6).log())
    peaks = torch.relu(r - math.log(PEAK_RATIO)).pow(2).sum(dim=(1, 2))
    return r.pow(2).mean() + peaks.mean()


def adversarial_step(state: RolloutState, episodes: Episodes, encoder: DemoEncoder, config: ModelConfig,
                     attend: AttentionBackend, params: RolloutParams, fraction: float, gen: torch.Generator,
                     noise: torch.Generator) -> AdversarialLosses:
    """One step on ``episodes``: the true window cached (none in a fresh step, ``true_chunks``), then
    per later chunk G's served sample (its last pass with gradient), G's loss and the critic's, and the
    served chunk written as context; one step of each. ``gen`` (CPU) draws the regress term's sigmas;
    ``noise`` (on the device) draws every noise tensor."""
    adversary = state.adversary
    if adversary is None:
        raise DemoError("no_adversary", "an adversarial step needs a state started with objective 'adversarial' "
                                        "(RolloutParams)")
    adv, device = params.adversarial, episodes.frames.device
    fpc, window = config.latent_frames_per_chunk, true_chunks(params, config.window_chunks, gen)
    inputs = step_inputs(state, episodes, encoder, config)
    lr = lr_at(params, state.step, fraction)
    set_lr(state.optimizer, lr)
    set_lr(adversary.optimizer, lr * (adv.critic_lr or params.lr) / params.lr)
    state.optimizer.zero_grad(set_to_none=True)
    adversary.optimizer.zero_grad(set_to_none=True)
    cache = RolloutCache(state.dit, config, attend, state.dit.new_rope(device))
    rolled = inputs.chunks - window
    g_total = c_total = 0.0
    for k in range(inputs.chunks):
        part = slice(k * fpc, (k + 1) * fpc)
        actions = inputs.actions[:, part]
        if k < window:
            cache.write(inputs.clean[:, :, part], actions, inputs.contexts[k], noise)
            continue
        exit_step = cache.schedule.steps - 1  # the served chunk (see above)
        prompt = state.dit.embed_text(state.text.encode(inputs.prompts[k]))  # with gradient
        x0, served = sample_chunk(cache, actions, inputs.contexts[k], prompt, exit_step, noise)
        loss = adv.weight * generator_term(adversary.critic, x0, actions)
        if adv.regress_weight > 0:
            loss = loss + adv.regress_weight * regress_loss(state, cache, inputs, k, params, gen, noise)
        if adv.detail_weight > 0:
            loss = loss + adv.detail_weight * detail_loss(x0, inputs.clean[:, :, part], adv.detail_hide_centre)
        (loss / rolled).backward()
        judged = critic_loss(adversary.critic, inputs.clean[:, :, part], x0, actions)
        (judged / rolled).backward()
        g_total, c_total = g_total + float(loss.detach()), c_total + float(judged.detach())
        if k + 1 < inputs.chunks:
            cache.write(served, actions, inputs.contexts[k], noise)
    adversary.optimizer.step()
    adversary.losses.append(c_total / max(1, rolled))
    return AdversarialLosses(finish_step(state, params, g_total / max(1, rolled)), adversary.losses[-1])
