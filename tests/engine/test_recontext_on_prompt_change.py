"""A prompt change read into the context (config recontext_on_prompt_change): the first chunk begun
under a new prompt first rewrites the window's K/V under it, so the context reads as made under the
new prompt; sessions whose prompt stays are untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.api import FrameAction
from engine.engine import Engine
from tests.engine._helpers import make_variant, run_chunk, run_chunks

W = [FrameAction(keys=("w",))]


@pytest.fixture
def pair() -> tuple[Engine, Engine]:
    """The same tiny model (sink 1, window 2) with and without the rewrite."""
    on = make_variant("tiny+recontext", recontext_on_prompt_change=True, cache_context_noise=0.3)
    off = make_variant("tiny+no-recontext", cache_context_noise=0.3)
    for engine in (on, off):
        assert engine.open_session("s", seed=5, prompt="a green valley")
    return on, off


def _slabs(engine: Engine, chunks: list[int]) -> torch.Tensor:
    handle = engine.session("s").handle
    return engine.pool.storage[:, :, [handle.slab_of(j) for j in chunks]].clone()


def test_a_session_whose_prompt_stays_is_untouched(pair: tuple[Engine, Engine]) -> None:
    on, off = pair
    for a, b in zip(run_chunks(on, "s", 5, W), run_chunks(off, "s", 5, W), strict=True):
        assert a.chunk_index == b.chunk_index and np.array_equal(a.frames, b.frames)
    assert torch.equal(_slabs(on, [0, 3, 4]), _slabs(off, [0, 3, 4]))


def test_the_first_chunk_under_a_new_prompt_reads_the_window_rewritten_under_it(pair: tuple[Engine, Engine]) -> None:
    on, off = pair
    run_chunks(on, "s", 4, W)
    run_chunks(off, "s", 4, W)
    sink_before, window_before = _slabs(on, [0]), _slabs(on, [2, 3])
    assert torch.equal(window_before, _slabs(off, [2, 3]))
    for engine in (on, off):
        engine.set_prompt("s", "a snowy winter day")
    on.begin_chunk("s", W)
    off.begin_chunk("s", W)
    records = on.session("s").records
    assert [records[j].prompt for j in (0, 2, 3)] == ["a green valley", "a snowy winter day", "a snowy winter day"]
    assert [off.session("s").records[j].prompt for j in (2, 3)] == ["a green valley", "a green valley"]
    assert torch.equal(_slabs(on, [0]), sink_before)  # the sink keeps the prompt it was made under
    assert not torch.equal(_slabs(on, [2]), window_before[:, :, :1])
    assert not torch.equal(_slabs(on, [3]), window_before[:, :, 1:])
    assert torch.equal(_slabs(off, [2, 3]), window_before)


def test_the_rewrite_is_the_cache_pass_under_the_new_prompt_reading_the_sink_and_the_window_before(
        pair: tuple[Engine, Engine]) -> None:
    on, _ = pair
    run_chunks(on, "s", 4, W)
    on.set_prompt("s", "a moonlit night")
    on.begin_chunk("s", W)
    state, runner = on.session("s"), on.runner
    handle = state.handle
    context = on.embed_prompt("a moonlit night")
    probe = on.pool.alloc("probe", 2)
    assert probe is not None
    for slab, chunk, reads in ((probe[0], 2, [handle.slab_of(0)]), (probe[1], 3, [handle.slab_of(0), handle.slab_of(2)])):
        record = state.records[chunk]
        latents = runner._cache_input(state.seed, chunk, record.latents)[None]
        runner.write_kv(latents, [record], context[None], [reads], [slab])
    assert torch.equal(on.pool.storage[:, :, probe], _slabs(on, [2, 3]))


def test_the_new_prompt_changes_the_chunks_after_it_and_a_second_chunk_rewrites_nothing(
        pair: tuple[Engine, Engine]) -> None:
    on, off = pair
    run_chunks(on, "s", 3, W)
    run_chunks(off, "s", 3, W)
    for engine in (on, off):
        engine.set_prompt("s", "sunny desert dunes")
    first_on, first_off = run_chunk(on, "s", W), run_chunk(off, "s", W)
    assert first_on.chunk_index == first_off.chunk_index == 3
    # the chunk read another context: its latents differ (the tiny random model's uint8 frames may not)
    assert not torch.equal(on.session("s").records[3].latents, off.session("s").records[3].latents)
    window = _slabs(on, [2, 3])
    on.begin_chunk("s", W)  # the window was made under this prompt: nothing to rewrite
    assert torch.equal(_slabs(on, [2, 3]), window)


def test_a_snapshot_after_the_change_restores_the_same_reading(pair: tuple[Engine, Engine]) -> None:
    on, _ = pair
    run_chunks(on, "s", 4, W)
    on.set_prompt("s", "a rainy stormy day")
    run_chunk(on, "s", W)
    data = on.snapshot("s")
    assert on.open_from_snapshot("t", data, seed=5, prompt="a rainy stormy day")
    assert [on.session("t").records[j].prompt for j in sorted(on.session("t").records)][-2:] == \
        ["a rainy stormy day", "a rainy stormy day"]
