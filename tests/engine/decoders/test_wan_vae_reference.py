"""The streaming decoder against an independent whole-sequence statement of Wan2.1's decoder math.

The reference below decodes all latent frames at once with explicit zero padding into the past
(a causal conv over the whole sequence), per-frame 2-D ops done by folding time into the batch,
and Wan's first-frame rule (the stream's first frame skips the temporal upsampling conv). It
shares only the parameters with the module under test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from engine.decoders._wan_blocks import (
    AttentionBlock,
    ResidualBlock,
    SpatialUpsample,
    TemporalSpatialUpsample,
)
from engine.decoders.wan_vae import WanVAECache, WanVAEConfig, WanVAEDecoder


def _causal(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    conv = cast(nn.Conv3d, module)  # a CausalConv3d, or a child of an nn.Sequential
    kt, kh, kw = conv.weight.shape[2:]
    return F.conv3d(F.pad(x, (kw // 2, kw // 2, kh // 2, kh // 2, kt - 1, 0)), conv.weight, conv.bias)


def _rms(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    gamma = cast(torch.Tensor, norm.gamma)
    return F.normalize(x, dim=1) * x.shape[1] ** 0.5 * gamma.reshape(1, -1, *([1] * (x.dim() - 2)))


def _frames_as_batch(x: torch.Tensor) -> torch.Tensor:
    b, c, t, h, w = x.shape
    return x.transpose(1, 2).reshape(b * t, c, h, w)


def _batch_as_frames(y: torch.Tensor, batch: int) -> torch.Tensor:
    bt, c, h, w = y.shape
    return y.reshape(batch, bt // batch, c, h, w).transpose(1, 2)


def _residual(block: ResidualBlock, x: torch.Tensor) -> torch.Tensor:
    r = block.residual
    h = _causal(r[2], F.silu(_rms(r[0], x)))
    h = _causal(r[6], F.silu(_rms(r[3], h)))
    skip = x if isinstance(block.shortcut, nn.Identity) else _causal(block.shortcut, x)
    return h + skip


def _attention(block: AttentionBlock, x: torch.Tensor) -> torch.Tensor:
    b, c = x.shape[:2]
    y = _rms(block.norm, _frames_as_batch(x))
    bt, _, h, w = y.shape
    q, k, v = (
        F.conv2d(y, block.to_qkv.weight, block.to_qkv.bias)
        .reshape(bt, 1, 3 * c, h * w)
        .transpose(2, 3)
        .chunk(3, -1)
    )
    out = F.scaled_dot_product_attention(q, k, v).squeeze(1).transpose(1, 2).reshape(bt, c, h, w)
    return _batch_as_frames(F.conv2d(out, block.proj.weight, block.proj.bias), b) + x


def _spatial(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    conv = cast(nn.Conv2d, module)
    y = F.interpolate(_frames_as_batch(x), scale_factor=2.0, mode="nearest-exact")
    return _batch_as_frames(F.conv2d(y, conv.weight, conv.bias, padding=1), x.shape[0])


def _temporal_spatial(block: TemporalSpatialUpsample, x: torch.Tensor) -> torch.Tensor:
    first, rest = x[:, :, :1], x[:, :, 1:]
    if rest.shape[2]:
        y = _causal(block.time_conv, rest)  # (b, 2c, t, h, w): two output frames per input frame
        b, c2, t, h, w = y.shape
        rest = torch.stack([y[:, : c2 // 2], y[:, c2 // 2 :]], dim=3).reshape(b, c2 // 2, 2 * t, h, w)
    return _spatial(block.resample[1], torch.cat([first, rest], dim=2))


def _reference_decode(module: WanVAEDecoder, z: torch.Tensor) -> torch.Tensor:
    config = module.config
    mean = torch.tensor(config.latent_mean).view(1, -1, 1, 1, 1)
    std = torch.tensor(config.latent_std).view(1, -1, 1, 1, 1)
    decoder = module.decoder
    x = _causal(decoder.conv1, _causal(module.conv2, z * std + mean))
    first, attention, last = decoder.middle
    x = _residual(cast(ResidualBlock, last), _attention(cast(AttentionBlock, attention), _residual(cast(ResidualBlock, first), x)))
    for block in decoder.upsamples:
        if isinstance(block, ResidualBlock):
            x = _residual(block, x)
        elif isinstance(block, TemporalSpatialUpsample):
            x = _temporal_spatial(block, x)
        else:
            assert isinstance(block, SpatialUpsample)
            x = _spatial(block.resample[1], x)
    return _causal(decoder.head[2], F.silu(_rms(decoder.head[0], x)))


def test_streaming_decode_equals_the_whole_sequence_reference() -> None:
    torch.manual_seed(0)
    module = WanVAEDecoder(WanVAEConfig.tiny()).eval()
    with torch.no_grad():
        for param in module.parameters():  # non-trivial norms, attention and biases
            param.add_(torch.randn_like(param) * 0.1)
    z = torch.randn(2, 4, 5, 4, 6)
    with torch.no_grad():
        expected = _reference_decode(module, z)
    caches: Sequence[WanVAECache | None] = [None, None]
    outputs, start = [], 0
    for size in (2, 1, 2):
        rgb, caches = module.decode_rgb(z[:, :, start : start + size], list(caches))
        outputs.append(rgb)
        start += size
    streamed = torch.cat(outputs, dim=2)
    assert streamed.shape == expected.shape == (2, 3, 17, 32, 48)
    assert float((streamed - expected).abs().max() / expected.abs().max()) <= 1e-5
