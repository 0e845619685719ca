"""The two score networks of distribution-matching training (``--objective dmd``), the distill
objective's teacher, the adversarial objective's critic, and their settings.

The real score R is a frozen copy of the DiT the run starts from (the teacher-forced model); the
fake score F is a trainable copy of it with its own optimizer, trained to denoise what the
generator makes. Both read prompts through a frozen copy of the starting text encoder, each with
its own prompt projection (``embed_text``), so R stays exactly the starting model.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch

from demo.config import GUIDED_SCALE, GUIDED_STEPS
from engine.config import ModelConfig
from engine.model import CausalDiT
from engine.text import HashTextEncoder

__all__ = ["OBJECTIVES", "AdversarialParams", "Adversary", "Critics", "DistillParams", "DmdParams", "LatentCritic",
           "Teacher"]

OBJECTIVES = ("regress", "dmd", "distill", "adversarial")


@dataclass(frozen=True)
class DmdParams:
    fake_lr: float | None = None  # the fake score's learning rate; None: the generator's
    fake_steps: int = 1  # fake-score updates per generator update (0: F stays the starting model)
    real_guidance: float | None = None  # R's guidance on the actions; None: the config's action_guidance
    regress_weight: float = 0.0  # weight of the true-world regression term added to the DMD loss
    min_sigma: float = 0.02  # DMD's and F's noise levels: uniform in [min_sigma, max_sigma]
    max_sigma: float = 0.98


@dataclass(frozen=True)
class DistillParams:
    """The distill objective (``demo._train_distill``): the teacher's sampling and the student's.

    The teacher's default is the sampling the demo model was served with until 2026-12-07: 3 steps,
    the first guided on the actions (scale 3). The weights shipped since carry that guidance in one
    pass (served unguided, ``demo.config``): distilling from them, pass ``teacher_guidance=1``."""

    teacher_timesteps: tuple[float, ...] = (1000.0, 667.0, 333.0)
    teacher_guidance: float = GUIDED_SCALE
    teacher_guided_steps: int = GUIDED_STEPS
    student_timesteps: tuple[float, ...] = (1000.0, 500.0)
    anchor_weight: float = 0.5  # the term keeping the student's flow at a random sigma the teacher's
    min_sigma: float = 0.02  # the anchor's noise level: uniform in [min_sigma, max_sigma]
    max_sigma: float = 0.98
    regress_weight: float = 0.0  # weight of the true-world regression term (the regress objective's) added
    detail_weight: float = 0.0  # the student's chunk's spatial spectrum matched to the true chunk's (``detail_loss``)
    detail_hide_centre: int = 0  # the centre square of this many latent cells a side left out of the detail term


@dataclass
class Teacher:
    """The distill objective's teacher: a frozen copy of the starting DiT and its text encoder."""

    real: CausalDiT
    text: HashTextEncoder

    @classmethod
    def start(cls, dit: CausalDiT, text: HashTextEncoder, device: torch.device) -> Teacher:
        return cls(copy.deepcopy(dit).to(device).eval().requires_grad_(False),
                   copy.deepcopy(text).to(device).eval().requires_grad_(False))

    def state_dict(self) -> dict[str, object]:
        return {"real": self.real.state_dict(), "text": self.text.state_dict()}

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.real.load_state_dict(state["real"])  # type: ignore[arg-type]
        self.text.load_state_dict(state["text"])  # type: ignore[arg-type]


@dataclass
class Critics:
    """R (frozen), F (trained) and F's optimizer; the text encoder both read prompts through."""

    real: CausalDiT
    fake: CausalDiT
    text: HashTextEncoder
    optimizer: torch.optim.Optimizer
    losses: list[float] = field(default_factory=list)  # F's flow-matching loss per step

    @classmethod
    def start(cls, dit: CausalDiT, text: HashTextEncoder, lr: float, weight_decay: float,
              device: torch.device) -> Critics:
        real = copy.deepcopy(dit).to(device).eval().requires_grad_(False)
        fake = copy.deepcopy(dit).to(device).train().requires_grad_(True)
        frozen = copy.deepcopy(text).to(device).eval().requires_grad_(False)
        opt = torch.optim.AdamW(fake.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.99))
        return cls(real, fake, frozen, opt)

    def state_dict(self) -> dict[str, object]:
        return {"real": self.real.state_dict(), "fake": self.fake.state_dict(), "text": self.text.state_dict(),
                "optimizer": self.optimizer.state_dict(), "losses": list(self.losses)}

    def load_state_dict(self, state: dict[str, object]) -> None:
        for name in ("real", "fake", "text", "optimizer"):
            getattr(self, name).load_state_dict(state[name])
        self.losses = list(state["losses"])  # type: ignore[call-overload]


@dataclass(frozen=True)
class AdversarialParams:
    """The adversarial objective (``demo._train_adversarial``): the regress term plus a critic's, and
    optionally the detail term."""

    weight: float = 0.1  # the generator's adversarial term (-critic(x0)), beside the regress term
    regress_weight: float = 1.0  # the regress objective's term on the same self-made context
    critic_lr: float | None = None  # the critic's learning rate; None: the generator's
    detail_weight: float = 0.0  # x0's spatial detail per latent channel matched to the true chunks' (log ratio)
    detail_hide_centre: int = 0  # the centre square of this many latent cells a side left out of the detail term
    width: int = 96  # the critic's first layer's channels (then 2x and 4x)


class LatentCritic(torch.nn.Module):
    """Tells the true world's chunks from the generator's, in latent space, under their actions.

    Input: a chunk of latents (B, C, F, h, w) and its per-frame action features (B, F, A); the F
    frames and their actions are stacked as channels, so the critic sees the motion within the
    chunk and the keys that asked for it. Four convolutions (two of stride 2) with spectral norm
    and a 1x1 head give one logit per patch of 4x4 latent cells (32x32 px of the demo's frames):
    (B, patches). Spectral norm bounds the critic's slope, so its hinge loss needs no penalty.
    """

    def __init__(self, config: ModelConfig, width: int = 96) -> None:
        super().__init__()
        frames = config.latent_frames_per_chunk
        sn = torch.nn.utils.parametrizations.spectral_norm
        width_in = frames * (config.in_dim + config.action_features)
        self.body = torch.nn.Sequential(
            sn(torch.nn.Conv2d(width_in, width, 3, padding=1)), torch.nn.LeakyReLU(0.2),
            sn(torch.nn.Conv2d(width, 2 * width, 4, stride=2, padding=1)), torch.nn.LeakyReLU(0.2),
            sn(torch.nn.Conv2d(2 * width, 2 * width, 3, padding=1)), torch.nn.LeakyReLU(0.2),
            sn(torch.nn.Conv2d(2 * width, 4 * width, 4, stride=2, padding=1)), torch.nn.LeakyReLU(0.2),
            sn(torch.nn.Conv2d(4 * width, 1, 1)))

    def forward(self, latents: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        b, c, f, h, w = latents.shape
        stacked = latents.float().reshape(b, c * f, h, w)
        keys = actions.float().reshape(b, -1, 1, 1).expand(b, actions.shape[1] * actions.shape[2], h, w)
        return self.body(torch.cat([stacked, keys], dim=1)).flatten(1)  # type: ignore[no-any-return]


@dataclass
class Adversary:
    """The adversarial objective's critic and its optimizer (Adam, betas 0 and 0.99 as GANs train)."""

    critic: LatentCritic
    optimizer: torch.optim.Optimizer
    losses: list[float] = field(default_factory=list)  # the critic's hinge loss per step

    @classmethod
    def start(cls, config: ModelConfig, params: AdversarialParams, lr: float, device: torch.device) -> Adversary:
        critic = LatentCritic(config, params.width).to(device).train()
        return cls(critic, torch.optim.Adam(critic.parameters(), lr=params.critic_lr or lr, betas=(0.0, 0.99)))

    def state_dict(self) -> dict[str, object]:
        return {"critic": self.critic.state_dict(), "optimizer": self.optimizer.state_dict(),
                "losses": list(self.losses)}

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.critic.load_state_dict(state["critic"])  # type: ignore[arg-type]
        self.optimizer.load_state_dict(state["optimizer"])  # type: ignore[arg-type]
        self.losses = list(state["losses"])  # type: ignore[call-overload]
