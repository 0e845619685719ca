"""Session state: determinism, batching across context lengths, offload/restore, recompute,
snapshots and rollback."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load

from engine.api import FrameAction, Phase, StepItem, StepPlan
from engine.errors import SessionStateError
from tests.engine._helpers import W, make_engine, run_chunk, run_chunks

A = FrameAction(keys=("a",), mouse=(30.0, -10.0))


def _latents(engine, session_id: str) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    return {k: v for k, v in load(engine.snapshot(session_id)).items() if k.startswith("latents.")}


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def test_same_seed_actions_and_prompt_give_identical_frames() -> None:
    one, two = make_engine(), make_engine()
    for engine in (one, two):
        engine.open_session("s", seed=5, prompt="snowy hills")
    for _ in range(3):
        assert np.array_equal(run_chunk(one, "s", [W]).frames, run_chunk(two, "s", [W]).frames)


def test_different_actions_give_different_frames() -> None:
    engine = make_engine()
    engine.open_session("w", seed=5, prompt="snowy hills")
    engine.open_session("a", seed=5, prompt="snowy hills")
    assert not np.array_equal(run_chunk(engine, "w", [W]).frames, run_chunk(engine, "a", [A]).frames)


def test_different_seeds_give_different_frames() -> None:
    engine = make_engine()
    engine.open_session("x", seed=1, prompt="p")
    engine.open_session("y", seed=2, prompt="p")
    assert not np.array_equal(run_chunk(engine, "x").frames, run_chunk(engine, "y").frames)


def test_batched_step_over_different_context_lengths_equals_each_session_alone() -> None:
    batched, alone = make_engine(), make_engine()
    histories = {"new": 0, "short": 1, "long": 4}  # chunks already generated: 0, 1 and wrapped
    for engine in (batched, alone):
        for sid, n in histories.items():
            engine.open_session(sid, seed=len(sid), prompt=f"world {sid}")
            run_chunks(engine, sid, n, [A])
            engine.begin_chunk(sid, [W])
    frames: dict[str, np.ndarray] = {}
    while (phase := batched.next_phase("long")) is not None:
        result = batched.step(StepPlan(tuple(StepItem(sid, phase) for sid in histories)))
        assert all(r.error is None for r in result.results)
        assert sum(result.batch_sizes.values()) == 3
        frames.update({r.session_id: r.chunk.frames for r in result.results if r.chunk is not None})
    assert sorted(frames) == ["long", "new", "short"]
    for sid in histories:
        while (phase := alone.next_phase(sid)) is not None:
            item = alone.step(StepPlan((StepItem(sid, phase),))).results[0]
            if item.chunk is not None:
                assert np.abs(item.chunk.frames.astype(int) - frames[sid].astype(int)).max() <= 1
        last = f"latents.{histories[sid]}"
        assert _rel_err(_latents(batched, sid)[last], _latents(alone, sid)[last]) <= 1e-5


def test_offload_then_restore_reproduces_the_next_chunk_exactly() -> None:
    moved, stayed = make_engine(), make_engine()
    for engine in (moved, stayed):
        engine.open_session("s", seed=3, prompt="desert")
        run_chunks(engine, "s", 4, [W])
    moved.offload("s")
    stats = moved.kv_stats()
    assert stats.per_session["s"][0] == 0 and stats.per_session["s"][1] > 0
    assert stats.slabs_in_use == 0
    moved.begin_chunk("s", [W])
    result = moved.step(StepPlan((StepItem("s", Phase.DENOISE),))).results[0]
    assert result.error is not None and "[offloaded]" in result.error
    assert moved.restore("s")
    assert moved.kv_stats().per_session["s"][1] == 0
    chunks = []
    while (phase := moved.next_phase("s")) is not None:
        chunks.append(moved.step(StepPlan((StepItem("s", phase),))).results[0].chunk)
    frames = next(c.frames for c in chunks if c is not None)
    assert np.array_equal(frames, run_chunk(stayed, "s", [W]).frames)
    assert torch.equal(_latents(moved, "s")["latents.4"], _latents(stayed, "s")["latents.4"])


def test_recompute_from_latents_reproduces_the_next_chunk() -> None:
    source, resumed = make_engine(), make_engine()
    source.open_session("s", seed=9, prompt="autumn forest")
    run_chunks(source, "s", 3, [A])  # sink 1 + window 2: every context chunk is still recorded
    data = source.snapshot("s")
    assert resumed.open_from_snapshot("s", data, seed=9, prompt="autumn forest")
    assert resumed.session("s").next_chunk == 3
    a, b = run_chunk(source, "s", [W]), run_chunk(resumed, "s", [W])
    assert (a.chunk_index, b.chunk_index) == (3, 3)
    assert np.abs(a.frames.astype(int) - b.frames.astype(int)).max() <= 1
    assert _rel_err(_latents(resumed, "s")["latents.3"], _latents(source, "s")["latents.3"]) <= 1e-5


def test_recompute_kv_in_place_reproduces_the_kv_bytes() -> None:
    engine = make_engine()
    engine.open_session("s", seed=9, prompt="p")
    run_chunks(engine, "s", 3, [A])
    handle = engine.session("s").handle
    slabs = [*handle.sink, *handle.ring]
    before = engine.pool.storage[:, :, slabs].clone()
    engine.pool.storage[:, :, slabs] = 0.0
    engine.recompute_kv("s")
    assert _rel_err(engine.pool.storage[:, :, slabs], before) <= 1e-5


def test_snapshot_of_another_model_is_rejected() -> None:
    engine = make_engine()
    engine.open_session("s", seed=1, prompt="p")
    run_chunk(engine, "s")
    data = engine.snapshot("s").replace(b'\\"model\\": \\"tiny\\"', b'\\"model\\": \\"tinx\\"')
    with pytest.raises(SessionStateError) as info:
        engine.open_from_snapshot("t", data, seed=1, prompt="p")
    assert info.value.code == "snapshot_model"
    with pytest.raises(SessionStateError) as info:
        engine.open_from_snapshot("t", b"not a snapshot", seed=1, prompt="p")
    assert info.value.code == "bad_snapshot"
    assert not engine.has_session("t")


def _run_and_deliver(engine, sid: str, count: int) -> None:  # type: ignore[no-untyped-def]
    for chunk in run_chunks(engine, sid, count, [W]):
        engine.mark_delivered(sid, chunk.chunk_index)


def test_rollback_restores_slab_ids_kv_and_continues_identically() -> None:
    engine, reference = make_engine(), make_engine()
    for e in (engine, reference):
        e.open_session("s", seed=4, prompt="night")
        _run_and_deliver(e, "s", 3)
    handle = engine.session("s").handle
    ids_before = (list(handle.sink), list(handle.ring))
    kv_before = engine.pool.storage[:, :, [*handle.sink, *handle.ring]].clone()
    run_chunks(engine, "s", 3, [A])  # 3 undelivered chunks: the window wraps and evicts delivered KV
    engine.begin_chunk("s", [A])  # and one in progress
    engine.step(StepPlan((StepItem("s", Phase.DENOISE),)))
    assert engine.rollback("s") == 3
    assert (handle.sink, handle.ring) == ids_before
    assert torch.equal(engine.pool.storage[:, :, [*handle.sink, *handle.ring]], kv_before)
    assert engine.next_phase("s") is None
    assert engine.kv_stats().per_session["s"] == (3, 0)  # journal slabs went back to the pool
    assert np.array_equal(run_chunk(engine, "s", [W]).frames, run_chunk(reference, "s", [W]).frames)


def test_rollback_uses_host_copies_when_the_pool_has_no_spare_slab() -> None:
    engine = make_engine(kv_budget_bytes=make_engine().info.kv_bytes_per_session)
    engine.open_session("s", seed=4, prompt="night")
    _run_and_deliver(engine, "s", 3)
    handle = engine.session("s").handle
    kv_before = engine.pool.storage.clone()
    run_chunks(engine, "s", 2, [A])
    assert [e.old_slab for e in handle.journal] == [None, None]
    assert engine.rollback("s") == 3
    assert torch.equal(engine.pool.storage, kv_before)


def test_rollback_never_goes_before_the_last_delivered_chunk() -> None:
    engine = make_engine()
    engine.open_session("s", seed=4, prompt="p")
    _run_and_deliver(engine, "s", 2)
    assert engine.rollback("s") == 2
    assert engine.session("s").next_chunk == 2


def test_delivering_a_chunk_not_yet_decoded_is_an_error() -> None:
    engine = make_engine()
    engine.open_session("s", seed=4, prompt="p")
    with pytest.raises(SessionStateError) as info:
        engine.mark_delivered("s", 0)
    assert info.value.code == "not_generated"


def test_reset_empties_the_context_and_keeps_the_same_kv_budget() -> None:
    engine, fresh = make_engine(), make_engine()
    engine.open_session("s", seed=1, prompt="p")
    run_chunks(engine, "s", 3)
    engine.reset("s", seed=2, prompt="q")
    fresh.open_session("s", seed=2, prompt="q")
    assert engine.session("s").next_chunk == 0
    assert engine.kv_stats().per_session["s"] == (3, 0)
    assert np.array_equal(run_chunk(engine, "s").frames, run_chunk(fresh, "s").frames)


def test_prompt_change_applies_from_the_next_chunk_begun() -> None:
    engine = make_engine()
    engine.open_session("s", seed=1, prompt="meadow")
    engine.begin_chunk("s", [W])
    engine.set_prompt("s", "snow")
    assert engine.session("s").work.prompt == "meadow"  # type: ignore[union-attr]
    while (phase := engine.next_phase("s")) is not None:
        engine.step(StepPlan((StepItem("s", phase),)))
    engine.begin_chunk("s", [W])
    assert engine.session("s").work.prompt == "snow"  # type: ignore[union-attr]


def test_close_returns_every_slab_including_offloaded_ones() -> None:
    engine = make_engine()
    engine.open_session("a", seed=1, prompt="p")
    engine.open_session("b", seed=1, prompt="p")
    run_chunks(engine, "a", 5)
    engine.offload("b")
    engine.close_session("a")
    engine.close_session("b")
    stats = engine.kv_stats()
    assert (stats.slabs_in_use, stats.slabs_offloaded, stats.per_session) == (0, 0, {})


def test_rollback_keeps_a_delivered_chunk_whose_cache_pass_is_pending() -> None:
    engine = make_engine()
    engine.open_session("s", seed=4, prompt="p")
    _run_and_deliver(engine, "s", 1)
    engine.begin_chunk("s", [W])
    while engine.next_phase("s") is not Phase.CACHE:
        engine.step(StepPlan((StepItem("s", engine.next_phase("s")),)))  # type: ignore[arg-type]
    engine.mark_delivered("s", 1)
    assert engine.rollback("s") == 2
    assert engine.next_phase("s") is Phase.CACHE


def test_rollback_drops_a_decoded_but_undelivered_chunk_and_its_decoder_state() -> None:
    engine, reference = make_engine(), make_engine()
    for e in (engine, reference):
        e.open_session("s", seed=4, prompt="p")
        _run_and_deliver(e, "s", 1)
    engine.begin_chunk("s", [A])
    while engine.next_phase("s") is not Phase.CACHE:
        engine.step(StepPlan((StepItem("s", engine.next_phase("s")),)))  # type: ignore[arg-type]
    assert engine.rollback("s") == 1
    assert engine.next_phase("s") is None
    assert np.array_equal(run_chunk(engine, "s", [W]).frames, run_chunk(reference, "s", [W]).frames)


def test_snapshot_holds_the_recorded_chunks_latents_actions_and_prompts() -> None:
    engine = make_engine()
    engine.open_session("s", seed=6, prompt="rain")
    _run_and_deliver(engine, "s", 6)  # sink 1 + window 2: chunk 6 needs chunks 0, 4 and 5
    data = engine.snapshot("s")
    tensors = load(data)
    assert sorted(tensors) == [f"{kind}.{i}" for kind in ("actions", "latents") for i in (0, 4, 5)]
    assert tuple(tensors["latents.5"].shape) == (4, 2, 4, 4)
    assert tuple(tensors["actions.5"].shape) == (2, engine.config.action_features)
    assert b'\\"next_chunk\\": 6' in data and b'\\"delivered\\": 5' in data and b"rain" in data
