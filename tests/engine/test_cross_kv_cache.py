"""The prompt's cross-attention K/V are computed once per session prompt and reused by every pass."""

from __future__ import annotations

import torch

from engine.api import FrameAction, StepItem, StepPlan
from tests.engine._helpers import W, make_engine, run_chunk


def test_a_session_caches_every_block_s_prompt_k_and_v_once_per_prompt() -> None:
    engine = make_engine()
    assert engine.open_session("s", seed=1, prompt="a lighthouse at night")
    run_chunk(engine, "s")
    state = engine.session("s")
    c = engine.config
    first = state.cross
    assert first is not None
    for t in first:
        assert tuple(t.shape) == (c.num_layers, 1, c.text_len, c.num_heads, c.head_dim)
    assert first[0].untyped_storage().data_ptr() != first[1].untyped_storage().data_ptr()
    run_chunk(engine, "s")
    assert state.cross is first  # same prompt: not recomputed
    engine.set_prompt("s", "a lighthouse in a storm")
    engine.begin_chunk("s", [W])
    assert state.cross is not None and state.cross is not first and not torch.equal(state.cross[0], first[0])
    assert state.work is not None and state.work.cross is state.cross
    k, v = engine.parts.model.cross_kv_all(state.context[None])  # type: ignore[index]
    assert torch.equal(state.cross[0], k) and torch.equal(state.cross[1], v)


def test_passes_with_cached_prompt_k_v_equal_passes_that_project_them() -> None:
    cached, plain = make_engine(), make_engine()
    for engine in (cached, plain):
        assert engine.open_session("s", seed=3, prompt="a canyon at noon")
    frames_cached = [run_chunk(cached, "s", [FrameAction(keys=("d",))]).frames for _ in range(3)]

    def without_cache(run, works_at: int):  # type: ignore[no-untyped-def]
        def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            for work in args[works_at]:
                if hasattr(work, "cross"):
                    work.cross = None
            return run(*args, **kwargs)
        return wrapped

    plain.runner.forward = without_cache(plain.runner.forward, 2)  # type: ignore[method-assign]
    plain.runner.write_kv = without_cache(plain.runner.write_kv, 1)  # type: ignore[method-assign]
    frames_plain = [run_chunk(plain, "s", [FrameAction(keys=("d",))]).frames for _ in range(3)]
    for a, b in zip(frames_cached, frames_plain, strict=True):
        assert a.tobytes() == b.tobytes()
    latents_cached = cached.session("s").records[2].latents
    latents_plain = plain.session("s").records[2].latents
    assert torch.equal(latents_cached, latents_plain)


def test_the_passes_read_the_cached_k_v() -> None:
    honest, tampered = make_engine(), make_engine()
    for engine in (honest, tampered):
        assert engine.open_session("s", seed=3, prompt="a canyon at noon")
        engine.begin_chunk("s", [W])
    state = tampered.session("s")
    assert state.work is not None and state.work.cross is not None
    state.work.cross = (torch.zeros_like(state.work.cross[0]), state.work.cross[1])  # the passes must see this
    for engine in (honest, tampered):
        while (phase := engine.next_phase("s")) is not None:
            engine.step(StepPlan((StepItem("s", phase),)))
    assert not torch.equal(honest.session("s").records[0].latents, tampered.session("s").records[0].latents)
