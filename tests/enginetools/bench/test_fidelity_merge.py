"""The exact way to attend FP8 values whose common offset varies by chunk: one call per chunk of
keys, each chunk's values centred by their own mean, merged by log-sum-exp."""

import torch
import torch.nn.functional as F

from engine.attention_fa3 import reference_attention_lse
from enginetools.bench.fidelity import per_chunk_own_means


def _exact(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)


def test_values_equal_within_each_chunk_come_back_exactly_from_the_merge() -> None:
    gen = torch.Generator().manual_seed(4)
    q, k = torch.randn(2, 6, 3, 8, generator=gen), torch.randn(2, 12, 3, 8, generator=gen)
    means = torch.randn(3, 3, 8, generator=gen) * 5  # chunk, head, channel: a large offset per chunk
    v = means.repeat_interleave(4, dim=0)[None].expand(2, 12, 3, 8).contiguous()
    ones = torch.ones(3)
    merged = per_chunk_own_means(q, k, v, ones, ones, 3, reference_attention_lse)
    # centred by their own means the values are 0: all that is left is each chunk's share of the mass
    torch.testing.assert_close(merged, _exact(q, k, v), rtol=0, atol=2e-5)


def test_the_lse_of_the_reference_is_that_of_the_scores() -> None:
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, n, 2, 4, generator=gen) for n in (3, 5, 5))
    out, lse = reference_attention_lse(q, k, v)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / 2.0
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1))
    torch.testing.assert_close(out, _exact(q, k, v))
