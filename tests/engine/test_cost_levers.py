"""The speed options of the cost work on the tiny CPU model: whole-pass graphs (with a stand-in
capturer: replay = call again through the static buffers), the last-pass K/V approximation and
the FP8 FFN."""

from __future__ import annotations

import torch

from engine._graphs import GraphKey, PassGraphs, rerun_capturer
from engine.api import Phase, StepItem, StepPlan
from engine.catalog import core_catalog
from engine.config import wan_13b_config
from engine.errors import ConfigError
from tests.engine._helpers import W, make_engine, make_variant, run_chunk

CHUNKS = 5  # tiny: sink 1 + window 2, so the ring wraps and slabs are reused


def _rollout(engine, chunks: int = CHUNKS) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    engine.open_session("s", seed=3, prompt="a hill")
    frames = [torch.from_numpy(run_chunk(engine, "s", [W]).frames) for _ in range(chunks)]
    state = engine.session("s")
    latents = [state.records[i].latents.clone() for i in sorted(state.records)]
    return frames, latents


def test_graph_path_equals_eager_path_and_captures_each_bucket_once() -> None:
    eager = make_engine()
    graphed = make_engine()
    graphs = PassGraphs(graphed.parts.model, graphed.parts.pool, graphed.parts.attend, graphed.parts.rope,
                        rerun_capturer)
    graphed.runner.graphs = graphs
    frames_a, latents_a = _rollout(eager)
    frames_b, latents_b = _rollout(graphed)
    for a, b in zip(latents_a, latents_b, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    assert [f.shape for f in frames_a] == [f.shape for f in frames_b]
    # context slabs 0, 1, 2, 3, 3: denoise buckets (no write) and cache buckets (write) per length
    keys = set(graphs._graphs)
    assert keys == {GraphKey(1, n, w) for n in (0, 1, 2, 3) for w in (False, True)}
    # a bucket's first call runs eagerly, its second captures: 4 denoise steps per chunk capture
    # every denoise bucket; the cache bucket of 3 slabs is the only one called twice
    assert graphs.captured == 4 + 1


def test_graphs_refill_per_chunk_inputs_once_per_chunk_and_the_prompt_kv_once_per_session() -> None:
    engine = make_engine()
    graphs = PassGraphs(engine.parts.model, engine.parts.pool, engine.parts.attend, engine.parts.rope, rerun_capturer)
    engine.runner.graphs = graphs
    _rollout(engine)
    # 5 passes per chunk (4 denoise, 1 cache): the RoPE rows once per chunk; the slab ids of the
    # denoise bucket's context, the cache bucket's context and its write slab once per chunk each
    assert graphs.refills == {"rope": CHUNKS, "cross": 1, "uploads": 3 * CHUNKS}
    engine.open_session("t", seed=4, prompt="another hill")
    run_chunk(engine, "t", [W])
    assert graphs.refills["cross"] == 2  # another session: its own prompt K/V


def test_graph_buckets_skip_mixed_context_batches_and_missing_prompt_kv() -> None:
    cross = (torch.zeros(1), torch.zeros(1))
    assert PassGraphs.eligible([[1, 2], [3, 4]], [cross, cross]) == [cross, cross]
    assert PassGraphs.eligible([[1, 2], [3]], [cross, cross]) is None
    assert PassGraphs.eligible([[1], [2]], [cross, None]) is None


def _count_forwards(engine) -> list[int]:
    """Every DiT pass the runner makes: its forwards and its K/V-only cache passes."""
    calls: list[int] = []
    original, original_kv = engine.runner.forward, engine.runner.write_kv

    def counted(*args, **kwargs):
        calls.append(args[0].shape[0])
        return original(*args, **kwargs)

    def counted_kv(*args, **kwargs):
        calls.append(args[0].shape[0])
        return original_kv(*args, **kwargs)

    engine.runner.forward = counted
    engine.runner.write_kv = counted_kv
    return calls


def test_kv_from_last_pass_skips_the_cache_forward_and_is_an_approximation() -> None:
    exact = make_engine()
    approx = make_variant("tiny-kv-last", kv_from_last_pass=True)
    calls = _count_forwards(approx)
    _, latents_exact = _rollout(exact)
    _, latents_approx = _rollout(approx)
    steps = len(approx.config.denoise_timesteps)
    assert len(calls) == CHUNKS * steps  # no cache pass
    torch.testing.assert_close(latents_approx[0], latents_exact[0])  # chunk 0 sees no context
    assert not torch.allclose(latents_approx[-1], latents_exact[-1], atol=1e-4)  # later chunks do
    assert all(torch.isfinite(x).all() for x in latents_approx)


def test_kv_from_last_pass_phases_stay_the_same_and_rollback_restores_the_ring() -> None:
    engine = make_variant("tiny-kv-last-phases", kv_from_last_pass=True)
    engine.open_session("s", seed=1, prompt="p")
    for _ in range(3):
        run_chunk(engine, "s", [W])
    slabs_before = list(engine.session("s").handle.ring)
    engine.begin_chunk("s", [W])
    seen = []
    while (phase := engine.next_phase("s")) is not None and phase is not Phase.CACHE:
        seen.append(phase)
        result = engine.step(StepPlan((StepItem("s", phase),))).results[0]
        assert result.error is None
    assert seen == [Phase.DENOISE] * 4 + [Phase.DECODE]
    engine.rollback("s")  # the chunk's K/V were written by its last denoise pass: undo them
    assert list(engine.session("s").handle.ring) == slabs_before
    assert engine.session("s").work is None


def test_fp8_ffn_runs_scaled_gemms_close_to_the_exact_ffn() -> None:
    exact = make_engine()
    fp8 = make_variant("tiny-fp8-ffn", fp8_ffn=True)
    assert all(block.ffn_fp8 is not None for block in fp8.parts.model.blocks)
    assert all(block.ffn_fp8 is None for block in exact.parts.model.blocks)
    _assert_close_not_equal(exact, fp8)


def _assert_close_not_equal(exact, lossy) -> None:  # type: ignore[no-untyped-def]
    """Two chunks of each: the lossy path moves every chunk's latents, by less than 10%."""
    _, a = _rollout(exact, 2)
    _, b = _rollout(lossy, 2)
    for x, y in zip(a, b, strict=True):
        rel = float((y - x).norm() / x.norm())
        assert 1e-6 < rel < 0.1, rel


def test_world_geometry_configs_are_servable_by_name() -> None:
    catalog = core_catalog()
    world = catalog.config("wan-1.3b-world")
    assert (world.sink_chunks, world.window_chunks, world.context_chunks) == (1, 2, 3)
    assert world.window_chunks * world.latent_frames_per_chunk == 6  # Matrix-Game 2.0's local window
    assert world.decoder_kind == "wan_vae" and world.tokens_per_chunk == 4680
    assert catalog.config("wan-1.3b-world-preview") == world.with_overrides(
        name="wan-1.3b-world-preview", decoder_kind="taehv")
    assert catalog.config("wan-1.3b-preview") == wan_13b_config().with_overrides(
        name="wan-1.3b-preview", decoder_kind="taehv")
    assert not (world.cuda_graphs or world.fp8_ffn or world.fp8_proj or world.kv_from_last_pass)  # levers off by default
    try:
        world.with_overrides(window_chunks=0)
    except ConfigError as exc:
        assert exc.code == "bad_config" and "window_chunks" in exc.message
    else:
        raise AssertionError("a zero window must be refused")


def test_cuda_graphs_config_needs_cuda() -> None:
    try:
        make_variant("tiny-graphs", cuda_graphs=True)
    except ConfigError as exc:
        assert exc.code == "graphs_need_cuda"
    else:
        raise AssertionError("cuda_graphs on the CPU must be refused")


def test_fp8_projections_run_one_scaled_qkv_gemm_and_the_cross_q_gemm_close_to_exact() -> None:
    exact = make_engine()
    fp8 = make_variant("tiny-fp8-proj", fp8_proj=True)
    dim = fp8.config.dim
    for block in fp8.parts.model.blocks:
        weight, scale, bias = block.qkv_fp8
        assert weight.dtype == torch.float8_e4m3fn and weight.shape == (3 * dim, dim)
        assert scale.shape == (1, 3 * dim) and bias.shape == (3 * dim,)
        assert block.cross_q_fp8[0].shape == (dim, dim)
    assert all(block.qkv_fp8 is None and block.cross_q_fp8 is None for block in exact.parts.model.blocks)
    _assert_close_not_equal(exact, fp8)


def test_graph_path_equals_eager_path_on_fp8_slabs() -> None:
    eager = make_engine(attention="fp8")
    graphed = make_engine(attention="fp8")
    graphed.runner.graphs = PassGraphs(graphed.parts.model, graphed.parts.pool, graphed.parts.attend,
                                       graphed.parts.rope, rerun_capturer)
    _, latents_a = _rollout(eager)
    _, latents_b = _rollout(graphed)
    for a, b in zip(latents_a, latents_b, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    assert graphed.runner.graphs.captured == 4 + 1
