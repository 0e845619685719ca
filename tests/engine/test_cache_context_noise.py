"""Noise on the cache pass's input (config cache_context_noise): seeded per (session, chunk), so
the KV rebuilt from records is the KV the cache pass wrote, and the records stay clean."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.api import FrameAction
from engine.engine import Engine
from tests.engine._helpers import make_engine, make_variant, run_chunks

W = [FrameAction(keys=("w",))]


@pytest.fixture
def noisy() -> Engine:
    return make_variant("tiny+cache-noise-test", cache_context_noise=0.3)


def test_the_noise_changes_what_later_chunks_see(noisy: Engine) -> None:
    plain = make_engine()
    for engine in (noisy, plain):
        assert engine.open_session("s", seed=2, prompt="a valley")
    first_noisy, first_plain = run_chunks(noisy, "s", 1, W)[0], run_chunks(plain, "s", 1, W)[0]
    assert np.array_equal(first_noisy.frames, first_plain.frames)  # chunk 0 sees no context
    later_noisy, later_plain = run_chunks(noisy, "s", 2, W), run_chunks(plain, "s", 2, W)
    assert not np.array_equal(later_noisy[-1].frames, later_plain[-1].frames)
    # the records keep the clean latents: chunk 0's (no context, so the same denoising) are equal
    assert torch.equal(noisy.session("s").records[0].latents, plain.session("s").records[0].latents)


def test_recomputing_the_kv_from_records_gives_back_the_written_bytes(noisy: Engine) -> None:
    assert noisy.open_session("s", seed=9, prompt="p")
    run_chunks(noisy, "s", 3, W)
    handle = noisy.session("s").handle
    slabs = [*handle.sink, *handle.ring]
    before = noisy.pool.storage[:, :, slabs].clone()
    noisy.pool.storage[:, :, slabs] = 0.0
    noisy.recompute_kv("s")
    err = (noisy.pool.storage[:, :, slabs] - before).abs().max() / before.abs().max()
    assert float(err) <= 1e-5
