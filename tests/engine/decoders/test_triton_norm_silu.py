"""The one-pass norm + SiLU Triton kernel equals eager PyTorch, in Triton's CPU interpreter.

The kernel is decorated when its module is imported, and the interpreter is chosen then, so the
checks run in a child process started with TRITON_INTERPRET=1 (this process keeps the compiled
kernel, which needs CUDA)."""

from __future__ import annotations

import textwrap

import pytest
import torch

from engine.decoders.wan_vae import WanVAEConfig, WanVAEDecoder
from engine.errors import EngineError
from tests.engine._helpers import run_interpreted

pytestmark = pytest.mark.slow  # Triton's CPU interpreter takes seconds to start


CHILD = textwrap.dedent(
    """
    import json
    import torch
    import torch.nn.functional as F
    from engine.decoders._triton_norm_silu import add_bias_residual_, norm_silu_into, norm_silu_usable
    from engine.decoders.wan_vae import WanVAEConfig, WanVAEDecoder

    report = {}
    generator = torch.Generator().manual_seed(0)
    for channels in (3, 96, 200):  # 200: not a power of two (masked lanes)
        x = torch.randn(2, channels, 3, 5, 7, generator=generator).contiguous(memory_format=torch.channels_last_3d)
        gamma = torch.rand(channels, generator=generator) + 0.5
        buffer = torch.full((2, channels, 5, 5, 7), 7.0).contiguous(memory_format=torch.channels_last_3d)
        norm_silu_into(x, gamma, buffer[:, :, 2:])  # behind two history frames, as a conv input
        expected = F.silu(F.normalize(x, dim=1) * gamma.reshape(1, -1, 1, 1, 1))
        report[f"err_{channels}"] = float((buffer[:, :, 2:] - expected).abs().max())
        report[f"history_kept_{channels}"] = bool((buffer[:, :, :2] == 7.0).all())
    x = torch.randn(2, 96, 3, 5, 7, generator=generator).contiguous(memory_format=torch.channels_last_3d)
    gamma, bias = torch.rand(96, generator=generator) + 0.5, torch.randn(96, generator=generator)
    out = torch.empty_like(x)
    norm_silu_into(x, gamma, out, bias)
    expected = F.silu(F.normalize(x + bias.reshape(1, -1, 1, 1, 1), dim=1) * gamma.reshape(1, -1, 1, 1, 1))
    report["err_bias"] = float((out - expected).abs().max())
    for layout in (torch.channels_last_3d, torch.contiguous_format):  # the kernel, then the eager fallback
        h = torch.randn(2, 96, 3, 5, 7, generator=generator).contiguous(memory_format=layout)
        skip = torch.randn(2, 96, 3, 5, 7, generator=generator).contiguous(memory_format=layout)
        expected = h + bias.reshape(1, -1, 1, 1, 1) + skip
        returned = add_bias_residual_(h, bias, skip)
        report[f"residual_err_{layout}"] = float((h - expected).abs().max())
        report[f"residual_in_place_{layout}"] = returned is h
    report["usable_contiguous"] = norm_silu_usable(torch.randn(1, 4, 2, 3, 3))
    report["usable_channels_last"] = norm_silu_usable(
        torch.randn(1, 4, 2, 3, 3).contiguous(memory_format=torch.channels_last_3d))

    # a tiny decoder's stream (first chunk, then a steady one) with and without the kernel
    torch.manual_seed(0)
    decoder = WanVAEDecoder(WanVAEConfig.tiny()).eval()
    latents = torch.randn(2, 4, 4, 4, 6, generator=generator)
    outputs = {}
    for fused in (False, True):
        decoder.set_layout("channels_last", fused=fused)
        first, caches = decoder.decode_rgb(latents[:, :, :3], [None, None])
        steady, caches = decoder.decode_rgb(latents[:, :, 3:], caches)
        outputs[fused] = (torch.cat([first, steady], dim=2), caches)
    (plain, plain_caches), (fused, fused_caches) = outputs[False], outputs[True]
    report["stream_rel_err"] = float((fused - plain).abs().max() / plain.abs().max())
    pairs = [(a, b) for f, p in zip(fused_caches, plain_caches) for a, b in zip(f.histories, p.histories)]
    report["cache_slots"] = [sum(len(c.histories) for c in caches) for caches in (plain_caches, fused_caches)]
    report["cache_rel_err"] = (max(float((a - b).abs().max()) for a, b in pairs)
                               / max(float(b.abs().max()) for _, b in pairs))
    print(json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def interpreted() -> dict[str, object]:
    return run_interpreted(CHILD, timeout=600)


@pytest.mark.parametrize("channels", [3, 96, 200])
def test_the_kernel_writes_silu_of_the_channel_norm_behind_the_history(
    interpreted: dict[str, object], channels: int
) -> None:
    assert interpreted[f"err_{channels}"] <= 1e-5  # type: ignore[operator]
    assert interpreted[f"history_kept_{channels}"] is True


def test_a_bias_is_added_before_the_norm(interpreted: dict[str, object]) -> None:
    assert interpreted["err_bias"] <= 1e-5  # type: ignore[operator]


@pytest.mark.parametrize("layout", ["torch.channels_last_3d", "torch.contiguous_format"])
def test_bias_and_residual_are_added_in_place_in_one_pass_or_eagerly(
    interpreted: dict[str, object], layout: str
) -> None:
    assert interpreted[f"residual_err_{layout}"] <= 1e-6  # type: ignore[operator]
    assert interpreted[f"residual_in_place_{layout}"] is True


def test_the_kernel_runs_only_on_channels_last_activations(interpreted: dict[str, object]) -> None:
    assert interpreted["usable_contiguous"] is False
    assert interpreted["usable_channels_last"] is True


def test_a_fused_decoder_streams_the_same_frames_and_caches_as_eager(interpreted: dict[str, object]) -> None:
    # fp32: one-ulp differences per norm (the kernel multiplies by gamma after dividing, eager
    # rounds in between) carried through 32 convs; the frames measured 5.2e-6, the caches 1.2e-5
    assert interpreted["stream_rel_err"] <= 1e-5  # type: ignore[operator]
    assert interpreted["cache_slots"] == [64, 64]  # two sessions x the tiny decoder's 32 causal convs
    assert interpreted["cache_rel_err"] <= 5e-5  # type: ignore[operator]


def test_fused_is_refused_where_the_kernel_cannot_run() -> None:
    decoder = WanVAEDecoder(WanVAEConfig.tiny()).eval()
    with pytest.raises(EngineError) as ncdhw:
        decoder.set_layout("ncdhw", fused=True)
    assert ncdhw.value.code == "bad_vae_layout"
    assert "channels_last" in str(ncdhw.value)
    if not torch.cuda.is_available():  # this process has no interpreter: a CPU tensor cannot use it
        with pytest.raises(EngineError) as cpu:
            decoder.set_layout("channels_last", fused=True)
        assert cpu.value.code == "bad_vae_layout"
    assert decoder.fused is False
