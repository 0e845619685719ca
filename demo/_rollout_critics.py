"""The two score networks of distribution-matching training (``--objective dmd``), the distill
objective's teacher, and their settings.

The real score R is a frozen copy of the DiT the run starts from (the teacher-forced model); the
fake score F is a trainable copy of it with its own optimizer, trained to denoise what the
generator makes. Both read prompts through a frozen copy of the starting text encoder, each with
its own prompt projection (``embed_text``), so R stays exactly the starting model.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch

from engine.model import CausalDiT
from engine.text import HashTextEncoder

__all__ = ["OBJECTIVES", "Critics", "DistillParams", "DmdParams", "Teacher"]

OBJECTIVES = ("regress", "dmd", "distill")


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
    """The distill objective (``demo._train_distill``): the teacher's sampling (the shipped model's
    served settings) and the student's."""

    teacher_timesteps: tuple[float, ...] = (1000.0, 667.0, 333.0)
    teacher_guidance: float = 3.0
    teacher_guided_steps: int = 1
    student_timesteps: tuple[float, ...] = (1000.0, 500.0)
    anchor_weight: float = 0.5  # the term keeping the student's flow at a random sigma the teacher's
    min_sigma: float = 0.02  # the anchor's noise level: uniform in [min_sigma, max_sigma]
    max_sigma: float = 0.98
    regress_weight: float = 0.0  # weight of the true-world regression term (the regress objective's) added


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
