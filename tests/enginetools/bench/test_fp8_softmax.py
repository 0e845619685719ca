"""The emulation of the FP8 kernel's rounding of the softmax weights, on rows built so that every
weight's fate in e4m3 is known: one key far above N identical others."""

import math

import pytest
import torch

from enginetools.bench.fp8_softmax import attention_p_rounded, softmax_mass


def _one_peak(gap: float, others: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One query; key 0's logit is `gap` above the `others` keys' (all 0); key 0's value is e0,
    every other key's value e1. (B, L, heads, d) = (1, 1, 1, 4) for q, (1, 1 + others, 1, 4) for k, v."""
    d = 4
    q = torch.zeros(1, 1, 1, d)
    q[0, 0, 0, 0] = gap * math.sqrt(d)
    k = torch.zeros(1, 1 + others, 1, d)
    k[0, 0, 0, 0] = 1.0
    v = torch.zeros(1, 1 + others, 1, d)
    v[0, 0, 0, 0] = 1.0
    v[0, 1:, 0, 1] = 1.0
    return q, k, v


def test_equal_logits_lose_nothing():
    q = torch.zeros(1, 3, 2, 8)
    k = torch.randn(1, 50, 2, 8)
    v = torch.randn(1, 50, 2, 8)
    out = attention_p_rounded(q, k, v)
    assert torch.allclose(out, v.mean(dim=1, keepdim=True).expand(1, 3, 2, 8), atol=1e-6)
    mass = softmax_mass(q, k)
    assert (mass.flushed_median, mass.subnormal_median, mass.subnormal_p95) == (0.0, 0.0, 0.0)


def test_weights_under_half_the_smallest_subnormal_vanish_from_the_numerator_only():
    # gap 13: the others' weight is 2^(8 - 13 log2 e) = 2^-10.76 < 2^-10, so it rounds to 0
    others = 100_000
    q, k, v = _one_peak(13.0, others)
    rest = others * math.exp(-13.0)
    exact_e1 = rest / (1 + rest)
    out = attention_p_rounded(q, k, v, offset_bits=8)
    assert out[0, 0, 0, 1].item() == 0.0  # the others' values are gone...
    assert out[0, 0, 0, 0].item() == pytest.approx(1 / (1 + rest), rel=1e-5)  # ...while the sum kept them
    mass = softmax_mass(q, k, offset_bits=8)
    assert mass.flushed_median == pytest.approx(exact_e1, rel=1e-4)
    assert mass.subnormal_median == 0.0
    assert mass.peak_gap_median == pytest.approx(13.0 - math.log(others), abs=1e-3)


def test_the_offset_keeps_weights_the_unshifted_exponential_flushes():
    # gap 8: unshifted the others weigh 2^-11.54 (flushed); with 8 bits of offset 2^-3.54 (a normal)
    q, k, v = _one_peak(8.0, 1000)
    exact = 1000 * math.exp(-8.0) / (1 + 1000 * math.exp(-8.0))
    assert attention_p_rounded(q, k, v, offset_bits=0)[0, 0, 0, 1].item() == 0.0
    kept = attention_p_rounded(q, k, v, offset_bits=8)[0, 0, 0, 1].item()
    assert kept == pytest.approx(exact, rel=0.07)  # 3 mantissa bits: within half a step (6.25%)
    assert kept != pytest.approx(exact, rel=1e-6)  # but rounded
    assert softmax_mass(q, k, offset_bits=0).flushed_median == pytest.approx(exact, rel=1e-4)
    assert softmax_mass(q, k, offset_bits=8).flushed_median == 0.0


def test_blocks_of_keys_with_their_own_maximum_keep_what_one_call_flushes():
    # 4 blocks of 25,000 keys: the peak's block still flushes its 24,999 others; in blocks 1-3 every
    # weight is its block's maximum (256 exactly), merged exactly by the blocks' maxima
    others = 99_999
    q, k, v = _one_peak(13.0, others)
    rest = others * math.exp(-13.0)
    out = attention_p_rounded(q, k, v, offset_bits=8, key_blocks=4)
    assert out[0, 0, 0, 1].item() == pytest.approx(75_000 * math.exp(-13.0) / (1 + rest), rel=1e-5)
    assert out[0, 0, 0, 0].item() == pytest.approx(1 / (1 + rest), rel=1e-5)
    assert attention_p_rounded(q, k, v, offset_bits=8, key_blocks=1)[0, 0, 0, 1].item() == 0.0
