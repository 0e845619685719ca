"""The two score networks of distribution-matching training (``--objective dmd``), and its settings.

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

__all__ = ["OBJECTIVES", "Critics", "DmdParams"]

OBJECTIVES = ("regress", "dmd")


@dataclass(frozen=True)
class DmdParams:
    fake_lr: float | None = None  # the fake score's learning rate; None: the generator's
    fake_steps: int = 1  # fake-score updates per generator update (0: F stays the starting model)
    real_guidance: float | None = None  # R's guidance on the actions; None: the config's action_guidance
    regress_weight: float = 0.0  # weight of the true-world regression term added to the DMD loss
    min_sigma: float = 0.02  # DMD's and F's noise levels: uniform in [min_sigma, max_sigma]
    max_sigma: float = 0.98


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
