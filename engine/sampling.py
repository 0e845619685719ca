"""Few-step flow-matching sampling with shifted sigmas and per-session seeded noise.

x_sigma = (1 - sigma) * clean + sigma * noise; the model predicts the flow (noise - clean) at
timestep sigma * num_train_timesteps. Each denoise step estimates the clean latents and, unless it
is the last, re-noises them to the next sigma with fresh seeded noise (Self-Forcing's sampler).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from engine.config import ModelConfig

__all__ = ["Schedule", "noise_seed", "seeded_noise"]


@dataclass(frozen=True)
class Schedule:
    sigmas: tuple[float, ...]  # one per denoise step, decreasing
    num_train_timesteps: int

    @classmethod
    def from_config(cls, config: ModelConfig) -> Schedule:
        shift, n = config.timestep_shift, config.num_train_timesteps
        sigmas = []
        for t in config.denoise_timesteps:
            s = t / n
            sigmas.append(shift * s / (1 + (shift - 1) * s))
        return cls(tuple(sigmas), n)

    @property
    def steps(self) -> int:
        return len(self.sigmas)

    def timestep(self, step: int) -> float:
        return self.sigmas[step] * self.num_train_timesteps

    def clean_estimate(self, x: torch.Tensor, flow: torch.Tensor, step: int) -> torch.Tensor:
        return x - self.sigmas[step] * flow

    def renoise(self, clean: torch.Tensor, noise: torch.Tensor, step: int) -> torch.Tensor:
        """Latents at the sigma of `step` from a clean estimate."""
        sigma = self.sigmas[step]
        return (1 - sigma) * clean + sigma * noise


def noise_seed(seed: int, chunk: int, step: int) -> int:
    """A 63-bit seed mixing the session seed, chunk index and step (stable across runs)."""
    digest = hashlib.blake2b(f"{seed}:{chunk}:{step}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def seeded_noise(
    shape: tuple[int, ...], seed: int, chunk: int, step: int, device: torch.device
) -> torch.Tensor:
    """Noise for (session seed, chunk, step), drawn on the CPU so that every device gets the same
    numbers (CUDA's generator differs from the CPU's): a session continues identically on any host,
    and a GPU rollout can be checked against the CPU reference. Sent through pinned memory without
    blocking the host."""
    gen = torch.Generator().manual_seed(noise_seed(seed, chunk, step))
    noise = torch.randn(shape, generator=gen, dtype=torch.float32)
    if device.type == "cpu":
        return noise
    return noise.pin_memory().to(device, non_blocking=True)
