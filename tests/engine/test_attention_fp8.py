"""The FP8 attention kernels against exact attention, in Triton's CPU interpreter (a child process
started with TRITON_INTERPRET=1: the interpreter is chosen when the kernels are decorated).

The interpreter's fp32 -> e4m3 cast rounds differently from the GPU's (up to one e4m3 step), so
the bound here is looser than the one measured on the H200 (results/ records that)."""

from __future__ import annotations

import textwrap

import pytest
import torch

from engine.attention import AttentionBackend
from engine.errors import ConfigError
from tests.engine._helpers import run_interpreted

pytestmark = pytest.mark.slow  # Triton's CPU interpreter takes seconds to start

CHILD = textwrap.dedent(
    """
    import json
    import torch
    import torch.nn.functional as F
    from engine.attention_fp8 import Fp8AttentionConfig, fp8_attention, fp8_attention_usable, reference_fp8_attention

    report = {"usable": fp8_attention_usable(torch.zeros(1, 1, 1, 32))}
    gen = torch.Generator().manual_seed(0)
    # 40 queries (tail of a 16-row block), 100 keys (tail of a 32-key block), keys off-centre
    q = torch.randn(2, 40, 2, 32, generator=gen)
    k = torch.randn(2, 100, 2, 32, generator=gen) + 0.5
    v = torch.randn(2, 100, 2, 32, generator=gen)
    ref = reference_fp8_attention(q, k, v)
    for pv in (True, False):
        cfg = Fp8AttentionConfig(block_m=16, block_n=32, pv_fp8=pv)
        out = fp8_attention(q, k, v, cfg)
        report[f"rel_{pv}"] = float((out - ref).norm() / ref.norm())
        report[f"cos_{pv}"] = float(F.cosine_similarity(out.flatten(), ref.flatten(), dim=0))
        report[f"shape_{pv}"] = list(out.shape)
    # strided inputs (a transposed view, as SDPA layouts hand over) give the same result
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)
    report["strided_equal"] = bool(torch.equal(fp8_attention(qt, k, v, Fp8AttentionConfig(block_m=16, block_n=32)),
                                               fp8_attention(q, k, v, Fp8AttentionConfig(block_m=16, block_n=32))))
    # a key that dominates: attention must follow it (its value comes out)
    k2 = torch.zeros(1, 64, 1, 32); k2[0, 37] = 8.0
    q2 = torch.full((1, 16, 1, 32), 1.0)
    v2 = torch.randn(1, 64, 1, 32, generator=gen)
    out2 = fp8_attention(q2, k2, v2, Fp8AttentionConfig(block_m=16, block_n=32))
    report["peak_err"] = float((out2[0, :, 0] - v2[0, 37, 0]).abs().max() / v2[0, 37, 0].abs().max())
    print(json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def report() -> dict[str, object]:
    return run_interpreted(CHILD)


def test_fp8_kernel_is_usable_in_the_interpreter(report: dict[str, object]) -> None:
    assert report["usable"] is True


@pytest.mark.parametrize("pv_fp8", [True, False])
def test_fp8_attention_tracks_exact_attention_with_tails(report: dict[str, object], pv_fp8: bool) -> None:
    assert report[f"shape_{pv_fp8}"] == [2, 40, 2, 32]
    assert float(report[f"rel_{pv_fp8}"]) < 0.15  # type: ignore[arg-type]
    assert float(report[f"cos_{pv_fp8}"]) > 0.99  # type: ignore[arg-type]


def test_fp8_attention_bf16_pv_is_closer_than_fp8_pv(report: dict[str, object]) -> None:
    assert float(report["rel_False"]) < float(report["rel_True"])  # type: ignore[arg-type]


def test_fp8_attention_reads_strided_inputs_and_follows_a_dominant_key(report: dict[str, object]) -> None:
    assert report["strided_equal"] is True
    assert float(report["peak_err"]) < 0.1  # type: ignore[arg-type]


def test_fp8_triton_choice_needs_a_hopper_class_gpu_on_this_host() -> None:
    with pytest.raises(ConfigError) as info:
        AttentionBackend.create("fp8_triton", torch.device("cpu"))
    assert info.value.code == "attention_unavailable"
    assert "fp8_triton" in AttentionBackend.create.__globals__["ATTENTION_CHOICES"]
