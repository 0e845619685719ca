"""The FP8 attention the engine runs, checked where the benchmark reproduces it (CPU: the exact
reference on the e4m3 inputs): values whose common offset differs from chunk to chunk come back
exactly, and the reference's log-sum-exp is the scores'."""

import torch
import torch.nn.functional as F

from engine.attention import AttentionBackend
from engine.attention_fa3 import reference_attention_lse
from engine.model.kv_fp8 import FP8_MAX, KVFp8
from enginetools.bench.fidelity import engine_fp8_attention


def _exact(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)


def _scales(heads: int, q: torch.Tensor, k: torch.Tensor, v_bound: float) -> KVFp8:
    peak = max(float(q.abs().max()), float(k.abs().max()))
    ones = torch.ones(heads)
    return KVFp8(ones * peak / FP8_MAX, ones * peak / FP8_MAX, torch.zeros(heads, q.shape[-1]),
                 ones * v_bound / FP8_MAX)


def test_values_equal_within_each_chunk_come_back_exactly_from_the_merge() -> None:
    gen = torch.Generator().manual_seed(4)
    q, k = torch.randn(2, 4, 3, 8, generator=gen), torch.randn(2, 12, 3, 8, generator=gen)
    means = torch.randn(3, 3, 8, generator=gen) * 5  # chunk, head, channel: a large offset per chunk
    v = means.repeat_interleave(4, dim=0)[None].expand(2, 12, 3, 8).contiguous()
    out = engine_fp8_attention(q, k, v, _scales(3, q, k, 1.0), AttentionBackend.create("fp8", torch.device("cpu")))
    # centred by their own means the values are 0: all that is left is each chunk's share of the mass,
    # which e4m3 q and k move by their rounding only (without the means added back: 100% off)
    assert float((out - _exact(q, k, v)).norm() / _exact(q, k, v).norm()) < 0.03


def test_chunks_with_different_offsets_stay_within_e4m3_rounding_of_exact_attention() -> None:
    gen = torch.Generator().manual_seed(6)
    q, k = torch.randn(1, 8, 2, 16, generator=gen), torch.randn(1, 32, 2, 16, generator=gen)
    offsets = 4 * torch.randn(1, 4, 1, 2, 16, generator=gen)
    v = (torch.randn(1, 4, 8, 2, 16, generator=gen) + offsets).reshape(1, 32, 2, 16)
    out = engine_fp8_attention(q, k, v, _scales(2, q, k, 8.0), AttentionBackend.create("fp8", torch.device("cpu")))
    assert float((out - _exact(q, k, v)).norm() / _exact(q, k, v).norm()) < 0.03


def test_the_lse_of_the_reference_is_that_of_the_scores() -> None:
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, n, 2, 4, generator=gen) for n in (3, 5, 5))
    out, lse = reference_attention_lse(q, k, v)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / 2.0
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1))
    torch.testing.assert_close(out, _exact(q, k, v))
