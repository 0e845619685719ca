"""Building blocks of the Wan2.1 VAE decoder: residual, mid attention, and upsampling blocks.

Module layouts (indices inside ``residual``/``resample``/``head``) mirror the official
checkpoint so its state dict loads by name. Every forward takes (B, C, T, h, w) activations
and an optional :class:`HistoryCursor` for the causal convs' temporal history.
"""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from engine.decoders._triton_norm_silu import add_bias_residual_
from engine.decoders._wan_causal import CausalConv3d, ChannelRMSNorm, HistoryCursor, fused_path, layout_of

__all__ = ["AttentionBlock", "ResidualBlock", "SpatialUpsample", "TemporalSpatialUpsample"]


class ResidualBlock(nn.Module):
    """norm-SiLU-conv3 twice, plus a 1x1x1 shortcut when the channel count changes."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        # indices 0..6 as in the checkpoint: norm, SiLU, conv, norm, SiLU, dropout (p=0), conv
        self.residual = nn.Sequential(
            ChannelRMSNorm(in_channels, spatial_dims=3),
            nn.SiLU(),
            CausalConv3d(in_channels, out_channels, (3, 3, 3)),
            ChannelRMSNorm(out_channels, spatial_dims=3),
            nn.SiLU(),
            nn.Identity(),
            CausalConv3d(out_channels, out_channels, (3, 3, 3)),
        )
        self.shortcut: nn.Module = (
            CausalConv3d(in_channels, out_channels, (1, 1, 1))
            if in_channels != out_channels
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor, cursor: HistoryCursor | None) -> torch.Tensor:
        norm1, conv1 = cast(ChannelRMSNorm, self.residual[0]), cast(CausalConv3d, self.residual[2])
        norm2, conv2 = cast(ChannelRMSNorm, self.residual[3]), cast(CausalConv3d, self.residual[6])
        skip = self.shortcut(x)
        if cursor is not None and fused_path(x, cursor):
            # conv1's bias goes into norm2's kernel, conv2's into the residual add: no bias passes
            h = conv1.forward_fused(x, norm1, cursor)
            h = conv2.forward_fused(h, norm2, cursor, x_bias=conv1.bias)
            return add_bias_residual_(h, conv2.bias, skip)
        h = conv1.forward_normed(x, norm1, cursor)
        h = conv2.forward_normed(h, norm2, cursor)
        return h.add_(skip)


class AttentionBlock(nn.Module):
    """Single-head self-attention over the h*w positions of each frame (no mixing in time)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = ChannelRMSNorm(channels, spatial_dims=2)
        self.to_qkv = nn.Conv2d(channels, channels * 3, 1)
        self.proj = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, channels, frames, height, width = x.shape
        # (B, C, T, h, w) -> (B*T, h*w, C): one attention problem per frame
        tokens = self.norm(x).permute(0, 2, 3, 4, 1).reshape(batch * frames, height * width, channels)
        qkv = F.linear(tokens, self.to_qkv.weight.flatten(1), self.to_qkv.bias)
        q, k, v = qkv.unsqueeze(1).chunk(3, dim=-1)  # each (B*T, 1, h*w, C)
        attended = F.scaled_dot_product_attention(q, k, v).squeeze(1)
        out = F.linear(attended, self.proj.weight.flatten(1), self.proj.bias)
        # (B*T, h*w, C) -> (B, C, T, h, w)
        out = out.reshape(batch, frames, height, width, channels).permute(0, 4, 1, 2, 3)
        return (x + out).contiguous(memory_format=layout_of(x))


def _upsample_2x(x: torch.Tensor) -> torch.Tensor:
    """(B, C, T, h, w) -> (B, C, T, 2h, 2w), nearest neighbour (equal to 'nearest-exact' at scale 2),
    in the layout of x. One broadcast copy: CUDA's upsample_nearest3d kernel took ~6 ms per call
    on the H200 for what is a memory copy."""
    if layout_of(x) == torch.channels_last_3d:
        y = x.permute(0, 2, 3, 4, 1)  # (B, T, h, w, C), contiguous
        b, t, h, w, c = y.shape
        y = y[:, :, :, None, :, None, :].expand(b, t, h, 2, w, 2, c).reshape(b, t, 2 * h, 2 * w, c)
        return y.permute(0, 4, 1, 2, 3)
    b, c, t, h, w = x.shape
    return x[:, :, :, :, None, :, None].expand(b, c, t, h, 2, w, 2).reshape(b, c, t, 2 * h, 2 * w)


def _conv2d_per_frame(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """Apply a 3x3 Conv2d to every frame of (B, C, T, h, w) as a (1, 3, 3) Conv3d."""
    weight = conv.weight.unsqueeze(2).contiguous(memory_format=layout_of(x))
    return F.conv3d(x, weight, conv.bias, padding=(0, 1, 1))


class SpatialUpsample(nn.Module):
    """2x in h and w, then a 3x3 conv halving the channels (Wan's 'upsample2d')."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        # index 0 is the (parameter-free) upsampling in the checkpoint's layout
        self.resample = nn.Sequential(nn.Identity(), nn.Conv2d(channels, channels // 2, 3, padding=1))

    def forward(self, x: torch.Tensor, cursor: HistoryCursor | None) -> torch.Tensor:
        return _conv2d_per_frame(cast(nn.Conv2d, self.resample[1]), _upsample_2x(x))


class TemporalSpatialUpsample(nn.Module):
    """2x in time through a causal (3, 1, 1) conv doubling channels, then 2x in h and w
    (Wan's 'upsample3d'). The very first frame of a stream is not doubled in time: it passes
    straight to the spatial part, and the temporal conv's history starts after it."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.resample = nn.Sequential(nn.Identity(), nn.Conv2d(channels, channels // 2, 3, padding=1))
        self.time_conv = CausalConv3d(channels, channels * 2, (3, 1, 1))

    def forward(self, x: torch.Tensor, cursor: HistoryCursor | None, first: bool) -> torch.Tensor:
        layout = layout_of(x) if cursor is None else cursor.memory_format
        lead = x[:, :, :1] if first else x[:, :, :0]
        rest = x[:, :, 1:] if first else x
        if rest.shape[2] == 0:
            # only the stream's first frame: the conv sees no frames, its history stays empty
            if cursor is not None:
                cursor.extend(rest, self.time_conv.context)
            doubled = rest
        else:
            batch, channels, frames, height, width = rest.shape
            y = self.time_conv.forward_cached(rest, cursor)  # (B, 2C, T, h, w)
            # (B, 2, C, T, h, w) -> (B, C, T, 2, h, w) -> (B, C, 2T, h, w): frame t yields 2t, 2t+1
            y = y.reshape(batch, 2, channels, frames, height, width).permute(0, 2, 3, 1, 4, 5)
            doubled = y.reshape(batch, channels, 2 * frames, height, width)
        x = (torch.cat([lead, doubled], dim=2) if first else doubled).contiguous(memory_format=layout)
        return _conv2d_per_frame(cast(nn.Conv2d, self.resample[1]), _upsample_2x(x))
