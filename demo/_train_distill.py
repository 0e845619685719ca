"""Stage 3 for speed (``--objective distill``): an unguided sampler distilled from a guided one.

The teacher samples as the demo model was served until 2026-12-07: 3 steps with the first guided on
the actions, 2 + 1 + 1 denoise passes and the cache pass, 5 passes per chunk. The student samples
``student_timesteps`` (default sigma 1.0 and 0.5: 2 + the cache pass, 3 passes; the teacher's own
1000,667,333: 4 passes, the guidance in one, which is how the shipped weights were made) with no
guidance. Guidance is what makes held keys move the view at the world's speed (unguided, 0.8x); here
the student learns to give the guided flow by itself.

Every target is a deterministic function of the student's own input, so squared error asks for no
mean (the regress objective's blur): at each of the student's steps the teacher (the starting DiT,
frozen) reads the very latents the student reads and gives its flow -- guided on the actions at the
steps the teacher guides (``teacher_guided_steps``: the first) with weight ``teacher_guidance`` --
and the student's flow is regressed to it. An anchor term at a random sigma keeps the student's
unguided flow equal to the teacher's elsewhere (``anchor_weight``). Context, as in the rollout
objectives: the first ``window_chunks`` true chunks, then the student's own 2-step chunks (what the
engine will make with it), written into both networks' caches with the same cache-pass noise; each
network reads its own K/V of them. Cached K/V carry no gradient: one chunk deep.

At zero loss the student's first step equals the teacher's guided first step, and its later steps
the teacher's estimates at the student's sigmas.

``detail_weight`` > 0 adds the adversarial objective's detail term (``detail_loss``) on the chunk the
student serves (its last step's clean estimate, with gradient) against the true chunk's spectrum. The
teacher's own chunks lose detail chunk after chunk (texture within bound 0.25-0.48 over five minutes for
the weights shipped 2026-12-07), and a student distilled to them alone inherits that; 2-step students
lost the ground entirely (texture 0.008 with the regress term, H100 2026-12-07). The term asks the
student for the world's detail where the teacher gives its flow.

``regress_weight`` > 0 adds the regress objective's term on the same student context: the true
world's chunk, noised, denoised reading the student's cache. The teacher's rollouts collapse in
half the seconds of a long play, and a student distilled from it alone lost the avatar (H100,
2026-12-05); the true world is the one teacher that keeps the avatar and the ground.
"""

from __future__ import annotations

import torch

from demo._rollout_cache import RolloutCache
from demo._rollout_critics import DistillParams
from demo._train_adversarial import detail_loss
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

__all__ = ["distill_step", "student_config", "teacher_config"]


def student_config(config: ModelConfig, distill: DistillParams) -> ModelConfig:
    """How the student samples: ``student_timesteps``, no guidance."""
    return config.with_overrides(denoise_timesteps=distill.student_timesteps, action_guidance=1.0,
                                 action_guidance_steps=0)


def teacher_config(config: ModelConfig, distill: DistillParams) -> ModelConfig:
    """How the teacher samples (the shipped model's served settings by default)."""
    return config.with_overrides(denoise_timesteps=distill.teacher_timesteps, action_guidance=distill.teacher_guidance,
                                 action_guidance_steps=distill.teacher_guided_steps)


def _chunk_loss(student: RolloutCache, teacher: RolloutCache, distill: DistillParams, actions: torch.Tensor,
                prompt: torch.Tensor, teacher_prompt: torch.Tensor, true: torch.Tensor, gen: torch.Generator,
                noise: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(the loss of one chunk, with gradient; the student's chunk as it would serve it, detached).
    ``true``: the true world's chunk, which the detail term's spectrum is taken from."""
    c, schedule = student.config, student.schedule
    shape = (actions.shape[0], c.in_dim, c.latent_frames_per_chunk, c.latent_height, c.latent_width)
    device = actions.device
    x = torch.randn(shape, generator=noise, device=device)
    loss = torch.zeros((), device=device)
    clean = x
    for step in range(schedule.steps):
        sigma = torch.full((shape[0],), schedule.sigmas[step], device=device)
        guidance = distill.teacher_guidance if step < distill.teacher_guided_steps else 1.0
        with torch.no_grad():
            target = teacher.guided_flow(x, sigma, actions, teacher_prompt, guidance)
        flow = student.flow(x, sigma, actions, prompt)
        loss = loss + (flow - target).pow(2).mean() / schedule.steps
        if step + 1 == schedule.steps and distill.detail_weight > 0:
            served = schedule.clean_estimate(x, flow, step)  # with gradient through the last pass
            loss = loss + distill.detail_weight * detail_loss(served, true, distill.detail_hide_centre)
            clean = served.detach()
        else:
            clean = schedule.clean_estimate(x, flow.detach(), step)
        if step + 1 < schedule.steps:
            x = schedule.renoise(clean, torch.randn(shape, generator=noise, device=device), step + 1)
    if distill.anchor_weight > 0:
        s = (distill.min_sigma + (distill.max_sigma - distill.min_sigma) * torch.rand(shape[0], generator=gen))
        s = s.to(device)
        xs = (1 - s[:, None, None, None, None]) * clean + s[:, None, None, None, None] * torch.randn(
            shape, generator=noise, device=device)
        with torch.no_grad():
            anchor = teacher.flow(xs, s, actions, teacher_prompt)
        loss = loss + distill.anchor_weight * (student.flow(xs, s, actions, prompt) - anchor).pow(2).mean()
    return loss, clean


def distill_step(state: RolloutState, episodes: Episodes, encoder: DemoEncoder, config: ModelConfig,
                 attend: AttentionBackend, params: RolloutParams, fraction: float, gen: torch.Generator,
                 noise: torch.Generator) -> float:
    """One distillation step over ``episodes``: the true window cached, then per later chunk the
    student's steps regressed to the teacher's flows and the student's chunk written as context; one
    optimizer step. Returns the mean loss over the rolled-out chunks. ``gen`` (CPU) draws the anchor's
    sigmas; ``noise`` (on the device) draws every noise tensor."""
    teacher_nets = state.teacher
    if teacher_nets is None:
        raise DemoError("no_teacher", "a distill step needs a state started with objective 'distill' (RolloutParams)")
    distill, device = params.distill, episodes.frames.device
    fpc, window = config.latent_frames_per_chunk, true_chunks(params, config.window_chunks, gen)
    inputs: StepInputs = step_inputs(state, episodes, encoder, config)
    set_lr(state.optimizer, lr_at(params, state.step, fraction))
    state.optimizer.zero_grad(set_to_none=True)
    student = RolloutCache(state.dit, student_config(config, distill), attend, state.dit.new_rope(device))
    teacher = RolloutCache(teacher_nets.real, teacher_config(config, distill), attend, teacher_nets.real.new_rope(device))
    teacher_ctx = embed_prompts(teacher_nets.real, teacher_nets.text, inputs.prompts, device)
    rolled = inputs.chunks - window
    total = 0.0
    for k in range(inputs.chunks):
        actions = inputs.actions[:, k * fpc:(k + 1) * fpc]
        if k < window:
            seen = student.seen(inputs.clean[:, :, k * fpc:(k + 1) * fpc], noise)
        else:
            prompt = state.dit.embed_text(state.text.encode(inputs.prompts[k]))  # with gradient
            loss, served = _chunk_loss(student, teacher, distill, actions, prompt, teacher_ctx[k],
                                       inputs.clean[:, :, k * fpc:(k + 1) * fpc], gen, noise)
            if distill.regress_weight > 0:
                loss = loss + distill.regress_weight * regress_loss(state, student, inputs, k, params, gen, noise)
            (loss / rolled).backward()
            total += float(loss.detach())
            if k + 1 == inputs.chunks:
                break
            seen = student.seen(served, noise)
        student.write_seen(seen, actions, inputs.contexts[k])
        teacher.write_seen(seen, actions, teacher_ctx[k])
    return finish_step(state, params, total / max(1, rolled))
