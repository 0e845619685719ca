"""The Wan2.1 VAE decoder trunk: conv1, middle (res, attention, res), upsamples, head."""

from __future__ import annotations

import itertools
from typing import cast

import torch
from torch import nn

from engine.decoders._wan_blocks import (
    AttentionBlock,
    ResidualBlock,
    SpatialUpsample,
    TemporalSpatialUpsample,
)
from engine.decoders._wan_causal import CausalConv3d, ChannelRMSNorm, HistoryCursor, fused_path

__all__ = ["Decoder3d", "stage_channels"]

RGB_CHANNELS = 3


def stage_channels(base: int, multipliers: tuple[int, ...]) -> list[int]:
    """Channel width entering each stage, deepest first: base * [m_last, reversed(m)...]."""
    return [base * m for m in (multipliers[-1], *reversed(multipliers))]


class Decoder3d(nn.Module):
    """Latent (B, z, T, h, w) -> RGB in [-1, 1]ish (B, 3, T', h*2^s, w*2^s), causal in time."""

    def __init__(
        self,
        base: int,
        z_channels: int,
        multipliers: tuple[int, ...],
        res_blocks: int,
        temporal_upsample: tuple[bool, ...],
    ) -> None:
        super().__init__()
        dims = stage_channels(base, multipliers)
        self.conv1 = CausalConv3d(z_channels, dims[0], (3, 3, 3))
        self.middle = nn.Sequential(
            ResidualBlock(dims[0], dims[0]), AttentionBlock(dims[0]), ResidualBlock(dims[0], dims[0])
        )
        blocks: list[nn.Module] = []
        for stage, (in_dim, out_dim) in enumerate(itertools.pairwise(dims)):
            if stage > 0:  # the previous upsample halved the channels
                in_dim //= 2
            for _ in range(res_blocks + 1):
                blocks.append(ResidualBlock(in_dim, out_dim))
                in_dim = out_dim
            if stage < len(multipliers) - 1:
                up = TemporalSpatialUpsample if temporal_upsample[stage] else SpatialUpsample
                blocks.append(up(out_dim))
        self.upsamples = nn.ModuleList(blocks)
        self.head = nn.Sequential(
            ChannelRMSNorm(dims[-1], spatial_dims=3), nn.SiLU(), CausalConv3d(dims[-1], RGB_CHANNELS, (3, 3, 3))
        )

    def forward(self, x: torch.Tensor, cursor: HistoryCursor | None, first: bool) -> torch.Tensor:
        x = self.conv1.forward_cached(x, cursor)
        res_a, attention, res_b = self.middle
        x = res_b(attention(res_a(x, cursor)), cursor)
        for block in self.upsamples:
            x = block(x, cursor, first) if isinstance(block, TemporalSpatialUpsample) else block(x, cursor)
        norm, conv = cast(ChannelRMSNorm, self.head[0]), cast(CausalConv3d, self.head[2])
        if cursor is not None and fused_path(x, cursor):
            rgb = conv.forward_fused(x, norm, cursor)
            return rgb if conv.bias is None else rgb.add_(conv.bias.view(1, -1, 1, 1, 1))  # 3 channels: cheap
        return conv.forward_normed(x, norm, cursor)
