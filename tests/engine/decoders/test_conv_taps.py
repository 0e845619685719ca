"""A causal 3-D conv run as 2-D convs over its time taps equals the 3-D conv; the form is chosen
per conv shape by measurement."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch
import torch.nn.functional as F

from engine.decoders._wan_causal import CausalConv3d, conv3d_as_taps
from engine.decoders._wan_layout import choose_conv_forms
from engine.decoders.wan_vae import WanVAECache, WanVAEConfig, WanVAEDecoder


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("kernel", [(3, 3, 3), (3, 1, 1)])
def test_the_taps_form_equals_conv3d_and_stays_channels_last(batch: int, kernel: tuple[int, int, int]) -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 6, 7, 5, 9, generator=generator).contiguous(memory_format=torch.channels_last_3d)
    weight = torch.randn(4, 6, *kernel, generator=generator)
    bias = torch.randn(4, generator=generator)
    padding = (kernel[1] // 2, kernel[2] // 2)
    expected = F.conv3d(x, weight, bias, padding=(0, *padding))
    got = conv3d_as_taps(x, weight, bias, padding)
    assert got.shape == expected.shape == (batch, 4, 5, 5, 9)
    assert got.is_contiguous(memory_format=torch.channels_last_3d)
    assert float((got - expected).abs().max() / expected.abs().max()) <= 1e-6  # fp32, summed in another order


def _stream(decoder: WanVAEDecoder, latents: torch.Tensor) -> torch.Tensor:
    caches: Sequence[WanVAECache | None] = [None] * latents.shape[0]
    outs = []
    for start, end in ((0, 3), (3, 5)):
        rgb, caches = decoder.decode_rgb(latents[:, :, start:end], list(caches))
        outs.append(rgb)
    return torch.cat(outs, dim=2)


def test_a_decoder_with_every_conv_in_taps_form_streams_the_same_frames() -> None:
    torch.manual_seed(0)
    decoder = WanVAEDecoder(WanVAEConfig.tiny()).eval()
    decoder.set_layout("channels_last")
    latents = torch.randn(2, 4, 5, 4, 6, generator=torch.Generator().manual_seed(1))
    expected = _stream(decoder, latents)
    convs = [m for m in decoder.modules() if isinstance(m, CausalConv3d) and m.context > 0]
    assert len(convs) == 32  # every causal conv of the tiny decoder (its cache has 32 slots)
    for conv in convs:
        conv.taps2d = True
    got = _stream(decoder, latents)
    assert float((got - expected).abs().max() / expected.abs().max()) <= 1e-5


def test_each_conv_gets_the_form_its_shape_measured_faster() -> None:
    torch.manual_seed(0)
    decoder = WanVAEDecoder(WanVAEConfig.tiny()).eval()
    decoder.set_layout("channels_last")
    timings = choose_conv_forms(decoder, 3, 4, 6)
    convs = [m for m in decoder.modules() if isinstance(m, CausalConv3d) and m.context > 0]
    shapes = {f"{list(c.last_input_shape or ())} x {list(c.weight.shape)}" for c in convs}
    assert sorted(timings) == sorted(shapes)
    for conv in convs:
        key = f"{list(conv.last_input_shape or ())} x {list(conv.weight.shape)}"
        assert conv.taps2d == (timings[key]["taps2d"] < timings[key]["conv3d"])


def test_an_ncdhw_decoder_keeps_every_conv_3d() -> None:
    decoder = WanVAEDecoder(WanVAEConfig.tiny()).eval()
    decoder.set_layout("ncdhw")
    assert choose_conv_forms(decoder, 3, 4, 6) == {}
    assert not any(m.taps2d for m in decoder.modules() if isinstance(m, CausalConv3d))
