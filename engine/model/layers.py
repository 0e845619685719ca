"""Small building blocks of the Wan2.1-lineage DiT: norms, modulation, timestep embedding."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["AffineLayerNorm", "RMSNorm", "gate", "layer_norm", "modulate", "sinusoidal_embedding"]


class RMSNorm(nn.Module):
    """RMS norm over the last dim, computed in fp32, with a learned `weight` (Wan's norm_q/norm_k)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (out * self.weight.float()).to(x.dtype)


class AffineLayerNorm(nn.Module):
    """Layer norm with `weight` and `bias`, computed in fp32 (Wan's norm3 before cross-attention)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x.float(), (x.shape[-1],), self.weight.float(), self.bias.float(), self.eps)


def layer_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Layer norm without parameters, in fp32."""
    return F.layer_norm(x.float(), (x.shape[-1],), eps=eps)


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor, frames: int) -> torch.Tensor:
    """x (B, L, dim) with L = frames * tokens_per_frame; shift/scale (B, frames, dim), fp32."""
    b, length, dim = x.shape
    xf = x.view(b, frames, length // frames, dim)
    return torch.addcmul(shift.unsqueeze(2), xf, 1 + scale.unsqueeze(2)).view(b, length, dim)


def gate(y: torch.Tensor, g: torch.Tensor, frames: int) -> torch.Tensor:
    """y (B, L, dim) times a per-frame gate g (B, frames, dim), in fp32."""
    b, length, dim = y.shape
    return (y.float().view(b, frames, length // frames, dim) * g.unsqueeze(2)).view(b, length, dim)


def sinusoidal_embedding(dim: int, t: torch.Tensor) -> torch.Tensor:
    """Wan's 1-D timestep embedding: [cos | sin] of t * 10000^(-i/half), fp32, shape t.shape + (dim,)."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, device=t.device, dtype=torch.float32) * (-math.log(10000.0) / half))
    angles = t.float().unsqueeze(-1) * freqs
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
