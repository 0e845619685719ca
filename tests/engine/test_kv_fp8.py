"""The FP8 KV cache (attention="fp8") on the CPU, through the exact reference attention: fixed
per-head scales, e4m3 slabs at half the bytes of bf16, and every session operation that moves or
rebuilds slabs (offload, restore, rollback, snapshots, batches of mixed context lengths) working on
them unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from engine.api import Phase, StepItem, StepPlan
from engine.attention_fa3 import FP8
from engine.kv.pool import as_bits
from engine.model._fused import merge_chunks
from engine.model.blocks import Block
from engine.model.kv_fp8 import (
    FP8_MAX,
    V_HEADROOM,
    KVFp8,
    KVFp8Stats,
    norm_bound_scale,
    saturated_fraction,
    to_e4m3,
)
from engine.rope import apply_rope
from tests.engine._helpers import W, make_engine, run_chunk, run_chunks


def _fp8_engine(**kwargs: object):  # type: ignore[no-untyped-def]
    return make_engine(attention="fp8", **kwargs)


def _slab_bytes(engine, slabs: list[int]) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """The slabs' e4m3 bytes and, as bytes too, the value means stored beside them."""
    means = engine.pool.means[:, slabs].contiguous().view(torch.uint8)
    return torch.cat([as_bits(engine.pool.storage)[:, :, slabs].flatten(), means.flatten()])


# the quantizer ------------------------------------------------------------------------------------


def test_to_e4m3_centres_scales_and_saturates_at_448() -> None:
    x = torch.tensor([[[[1.0, -2.0], [100.0, 0.5]]]])  # (1, 1, heads 2, d 2)
    scale = torch.tensor([0.5, 0.1])
    mean = torch.tensor([[0.0, 0.0], [0.0, 0.5]])
    out = to_e4m3(x, scale, mean)
    assert out.dtype == FP8
    assert out.float().tolist() == [[[[2.0, -4.0], [448.0, 0.0]]]]  # 100/0.1 = 1000 saturates
    assert saturated_fraction(x, scale, mean) == 0.25


def test_e4m3_keeps_three_mantissa_bits_whatever_the_scale() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 4096, 1, 8, generator=gen)
    peak = x.abs().max().item() / FP8_MAX
    for scale in (peak, 30 * peak, 1000 * peak):  # the peak at 448, at 15, at 0.45
        q = to_e4m3(x, torch.tensor([scale])).float() * scale
        normal = x.abs() > 2**-6 * scale
        rel = ((q - x).abs() / x.abs())[normal]
        assert rel.max().item() <= 2**-4 + 1e-6  # round to nearest: half of a 2^-3 step


def test_q_and_k_scales_bound_every_rms_normed_roped_value() -> None:
    dim, heads = 64, 4
    gen = torch.Generator().manual_seed(1)
    weight = torch.rand(dim, generator=gen) * 2
    scale = norm_bound_scale(weight, heads)
    x = torch.randn(1, 500, dim, generator=gen)
    x[0, 0] = 0.0
    x[0, 0, 5] = 3.0  # all of a token's energy in one channel: the bound itself
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)) * weight
    angles = torch.rand(1, 500, 1, dim // heads // 2, generator=gen) * 6.3
    roped = apply_rope(normed.view(1, 500, heads, -1), angles.cos(), angles.sin())
    scaled = roped.abs() / scale[:, None]
    assert scaled.max().item() <= FP8_MAX * (1 + 1e-5)
    g = weight.view(heads, -1).abs().amax(1)
    assert torch.allclose(scale, math.sqrt(dim) * g / FP8_MAX)


def test_calibration_turns_the_mean_key_and_the_peak_value_into_scales() -> None:
    stats = KVFp8Stats(torch.zeros(2, 4, dtype=torch.float64))
    k = torch.ones(1, 3, 2, 4)
    k[0, :, 1] = torch.tensor([[1.0, 2, 3, 4], [3, 2, 1, 0], [2, 2, 2, 2]])
    v = torch.zeros(1, 3, 2, 4)
    v[0, 1, 0, 2], v[0, 2, 1, 0] = -3.0, 5.0
    with pytest.raises(ValueError, match="a cache pass among them"):
        KVFp8.from_calibration(torch.ones(8), torch.ones(8), 2, stats)
    stats.add(k, v, cache_pass=True)
    denoise_v = torch.full((1, 3, 2, 4), 0.5)  # a denoise pass: its peak counts, its mean does not
    stats.add(torch.ones(1, 3, 2, 4), denoise_v)
    scales = KVFp8.from_calibration(torch.ones(8), torch.ones(8), 2, stats)
    assert scales.k_mean.tolist() == [[1.0] * 4, [1.5, 1.5, 1.5, 1.5]]
    # the cache pass's mean is [[0, 0, -1, 0], [5/3, 0, 0, 0]]: a chunk mean of its size keeps
    # |v - mean| <= peak + max|mean|, mapped to 448 / V_HEADROOM
    assert scales.v_scale.tolist() == pytest.approx(
        [(3.0 + 1.0) * V_HEADROOM / FP8_MAX, (5.0 + 5 / 3) * V_HEADROOM / FP8_MAX], rel=1e-6)
    assert scales.q_scale.tolist() == pytest.approx([math.sqrt(8) / FP8_MAX] * 2, rel=1e-6)
    assert torch.allclose(scales.k_scale, torch.tensor([math.sqrt(8) + 1, math.sqrt(8) + 1.5]) / FP8_MAX)
    assert scales.descale.q is scales.q_scale and scales.descale.v is scales.v_scale


def test_centring_keys_by_one_vector_leaves_the_softmax_unchanged() -> None:
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, n, 2, 8, generator=gen, dtype=torch.float64) for n in (5, 9, 9))
    mean = torch.randn(2, 8, generator=gen, dtype=torch.float64)

    def attend(keys: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q.transpose(1, 2), keys.transpose(1, 2), v.transpose(1, 2))

    torch.testing.assert_close(attend(k - mean), attend(k), rtol=0, atol=1e-12)


def test_chunks_attended_apart_and_merged_by_log_sum_exp_equal_attention_over_all_keys() -> None:
    """Each chunk's values centred by their own (different) mean, each chunk attended alone, then
    merged with the means added back: exactly attention over all keys."""
    gen = torch.Generator().manual_seed(4)
    chunks, tokens = 3, 6
    q = torch.randn(2, tokens, 2, 8, generator=gen, dtype=torch.float64)
    k = torch.randn(2, chunks * tokens, 2, 8, generator=gen, dtype=torch.float64)
    offsets = 5 * torch.randn(2, chunks, 1, 2, 8, generator=gen, dtype=torch.float64)  # a mean per chunk
    v = (torch.randn(2, chunks, tokens, 2, 8, generator=gen, dtype=torch.float64) + offsets).flatten(1, 2)
    means = v.view(2, chunks, tokens, 2, 8).mean(dim=2)  # (B, C, heads, d)
    centred = v.view(2, chunks, tokens, 2, 8) - means[:, :, None]
    outs, lses = [], []
    for c in range(chunks):
        keys = k[:, c * tokens : (c + 1) * tokens].transpose(1, 2)
        scores = q.transpose(1, 2) @ keys.transpose(-1, -2) / math.sqrt(8)  # (B, heads, T, T)
        lses.append(torch.logsumexp(scores, dim=-1))
        outs.append((scores.softmax(-1) @ centred[:, c].transpose(1, 2)).transpose(1, 2))
    merged = merge_chunks(torch.stack(outs, 1), torch.stack(lses, 1), means, torch.float64)
    exact = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(merged, exact, rtol=0, atol=1e-5)  # the merge computes in fp32
    wrong = merge_chunks(torch.stack(outs, 1), torch.stack(lses, 1), means.mean(1, keepdim=True).expand_as(means),
                         torch.float64)  # one mean for all chunks: off by the chunks' spread
    assert float((wrong - exact).abs().max()) > 0.1


def test_centring_values_by_one_vector_moves_the_output_by_exactly_that_vector() -> None:
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, n, 2, 8, generator=gen, dtype=torch.float64) for n in (5, 9, 9))
    mean = torch.randn(2, 8, generator=gen, dtype=torch.float64)

    def attend(values: torch.Tensor) -> torch.Tensor:
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), values.transpose(1, 2))
        return out.transpose(1, 2)

    torch.testing.assert_close(attend(v - mean) + mean, attend(v), rtol=0, atol=1e-12)


# the engine ---------------------------------------------------------------------------------------


def test_fp8_slabs_take_half_the_bytes_of_bf16_and_the_engine_says_so() -> None:
    bf16, fp8 = make_engine(dtype="bfloat16"), _fp8_engine(dtype="bfloat16")
    assert fp8.info.kv_bytes_per_session * 2 == bf16.info.kv_bytes_per_session
    assert (fp8.info.kv_dtype, bf16.info.kv_dtype) == ("float8_e4m3fn", "bfloat16")
    assert fp8.pool.storage.dtype == FP8 and fp8.kv_stats().slab_bytes * 2 == bf16.kv_stats().slab_bytes
    budget = 4 * bf16.info.kv_bytes_per_session  # one budget holds twice the sessions in FP8
    assert make_engine(dtype="bfloat16", kv_budget_bytes=budget).pool.num_slabs * 2 == _fp8_engine(
        dtype="bfloat16", kv_budget_bytes=budget).pool.num_slabs


def test_every_block_gets_calibrated_scales_and_quantizes_q_k_v() -> None:
    engine = _fp8_engine()
    blocks = [block for block in engine.parts.model.blocks if isinstance(block, Block)]
    assert len(blocks) == engine.config.num_layers
    for block in blocks:
        scales = block.kv_fp8
        assert scales is not None
        assert scales.k_mean.shape == (engine.config.num_heads, engine.config.head_dim)
        assert (scales.v_scale > 0).all() and (scales.q_scale > 0).all()
    assert make_engine().parts.model.blocks[0].kv_fp8 is None  # type: ignore[union-attr]


def test_a_cache_pass_writes_e4m3_bytes_that_dequantize_to_the_exact_path_s_keys() -> None:
    exact, fp8 = make_engine(), _fp8_engine()
    for engine in (exact, fp8):
        engine.open_session("s", seed=2, prompt="a hill")
        run_chunk(engine, "s", [W])
    slab = exact.session("s").handle.slab_of(0)
    assert fp8.session("s").handle.slab_of(0) == slab
    block = fp8.parts.model.blocks[0]
    scales = block.kv_fp8  # type: ignore[union-attr]
    k8 = fp8.pool.storage[0, 0, slab]  # (tokens, heads, d) e4m3
    keys = k8.float() * scales.k_scale[:, None] + scales.k_mean
    reference = exact.pool.storage[0, 0, slab]
    assert float((keys - reference).norm() / reference.norm()) < 0.05  # e4m3: ~2^-5 per element
    reference = exact.pool.storage[0, 1, slab]
    stored_mean = fp8.pool.means[0, slab]  # the values are stored centred by their own chunk's mean
    torch.testing.assert_close(stored_mean, reference.float().mean(dim=0), rtol=0.02, atol=0.02 * float(
        reference.float().abs().max()))
    values = fp8.pool.storage[0, 1, slab].float() * scales.v_scale[:, None] + stored_mean
    assert float((values - reference).norm() / reference.norm()) < 0.05
    centred = fp8.pool.storage[0, 1, slab].float().mean(dim=0) * scales.v_scale[:, None]
    assert float(centred.norm() / stored_mean.norm()) < 0.05  # no common offset left in the bytes


def test_an_fp8_rollout_stays_within_one_percent_of_the_exact_one_per_chunk() -> None:
    exact, fp8 = make_engine(), _fp8_engine()
    for engine in (exact, fp8):
        engine.open_session("s", seed=5, prompt="snowy hills")
        run_chunks(engine, "s", 5, [W])  # sink 1 + window 2: the ring wraps
    for i in range(5):
        a, b = exact.session("s").records[i].latents, fp8.session("s").records[i].latents
        assert float((b - a).norm() / a.norm()) < 1e-2
        assert float(F.cosine_similarity(a.flatten(), b.flatten(), dim=0)) > 0.9999


def test_offload_and_restore_move_fp8_slabs_bit_for_bit() -> None:
    moved, stayed = _fp8_engine(), _fp8_engine()
    for engine in (moved, stayed):
        engine.open_session("s", seed=3, prompt="desert")
        run_chunks(engine, "s", 4, [W])
    handle = moved.session("s").handle
    before = _slab_bytes(moved, handle.device_slabs())
    moved.offload("s")
    assert handle.offloaded is not None and handle.offloaded.data.dtype == FP8
    assert moved.restore("s")
    assert torch.equal(_slab_bytes(moved, handle.device_slabs()), before)
    assert np.array_equal(run_chunk(moved, "s", [W]).frames, run_chunk(stayed, "s", [W]).frames)


def test_rollback_restores_fp8_slab_ids_and_bytes_and_continues_identically() -> None:
    engine, reference = _fp8_engine(), _fp8_engine()
    for e in (engine, reference):
        e.open_session("s", seed=4, prompt="night")
        for chunk in run_chunks(e, "s", 3, [W]):
            e.mark_delivered("s", chunk.chunk_index)
    handle = engine.session("s").handle
    ids = (list(handle.sink), list(handle.ring))
    before = _slab_bytes(engine, [*handle.sink, *handle.ring])
    run_chunks(engine, "s", 3, [W])  # undelivered: the window wraps and evicts delivered KV
    assert engine.rollback("s") == 3
    assert (handle.sink, handle.ring) == ids
    assert torch.equal(_slab_bytes(engine, [*handle.sink, *handle.ring]), before)
    assert np.array_equal(run_chunk(engine, "s", [W]).frames, run_chunk(reference, "s", [W]).frames)


def test_rollback_through_host_copies_restores_fp8_bytes() -> None:
    engine = _fp8_engine(kv_budget_bytes=_fp8_engine().info.kv_bytes_per_session)
    engine.open_session("s", seed=4, prompt="night")
    for chunk in run_chunks(engine, "s", 3, [W]):
        engine.mark_delivered("s", chunk.chunk_index)
    before = as_bits(engine.pool.storage).clone(), engine.pool.means.clone()
    run_chunks(engine, "s", 2, [W])
    assert [e.old_slab for e in engine.session("s").handle.journal] == [None, None]  # host copies
    assert engine.rollback("s") == 3
    assert torch.equal(as_bits(engine.pool.storage), before[0]) and torch.equal(engine.pool.means, before[1])


def test_a_snapshot_recomputes_the_same_fp8_bytes() -> None:
    source, resumed = _fp8_engine(), _fp8_engine()
    source.open_session("s", seed=9, prompt="autumn forest")
    run_chunks(source, "s", 3, [W])  # every context chunk still recorded: recompute is exact
    assert resumed.open_from_snapshot("s", source.snapshot("s"), seed=9, prompt="autumn forest")
    slabs = [*source.session("s").handle.sink, *source.session("s").handle.ring]
    assert slabs == [*resumed.session("s").handle.sink, *resumed.session("s").handle.ring]
    assert torch.equal(_slab_bytes(resumed, slabs), _slab_bytes(source, slabs))
    assert np.array_equal(run_chunk(source, "s", [W]).frames, run_chunk(resumed, "s", [W]).frames)


def test_a_batch_of_mixed_context_lengths_is_one_call_per_layer_and_equals_each_alone() -> None:
    batched, alone = _fp8_engine(), _fp8_engine()
    histories = {"new": 0, "short": 1, "long": 4}
    for engine in (batched, alone):
        for sid, n in histories.items():
            engine.open_session(sid, seed=len(sid), prompt=f"world {sid}")
            run_chunks(engine, sid, n, [W])
            engine.begin_chunk(sid, [W])
    attend = batched.parts.attend
    calls: list[tuple[int, ...]] = []
    with_lse = attend.with_lse

    def counted(q, k, v, descale=None):  # type: ignore[no-untyped-def]
        calls.append((q.shape[0], *k.shape[:2]))
        return with_lse(q, k, v, descale)

    attend.with_lse = counted  # type: ignore[method-assign]
    result = batched.step(StepPlan(tuple(StepItem(sid, Phase.DENOISE) for sid in histories)))
    assert all(r.error is None for r in result.results)
    tokens = batched.config.tokens_per_chunk
    # one call per layer over every (sample, chunk of keys): 1 + 2 + 4 chunks (0, 1 and 3 context slabs)
    assert calls == [(7, 7, tokens)] * batched.config.num_layers
    for sid in histories:
        alone.step(StepPlan((StepItem(sid, Phase.DENOISE),)))
        a, b = alone.session(sid).work.x, batched.session(sid).work.x  # type: ignore[union-attr]
        assert float((a - b).abs().max() / a.abs().max()) <= 1e-5
