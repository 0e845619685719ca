"""A stream's first chunk decoded in two calls (its first latent frame alone, then the rest): the
first frames come out sooner and every frame equals the one-call decode."""

from __future__ import annotations

import numpy as np

from engine.api import FrameAction, Phase, StepItem, StepPlan
from engine.decoders.wan_vae import WanVAEConfig
from engine.engine import Engine
from tests.engine._helpers import make_variant


def _engine(split: int) -> Engine:
    engine = make_variant(f"tiny+wan-vae-split{split}-test", decoder_kind="wan_vae", first_decode_split=split,
                          extra={"wan_vae": WanVAEConfig.tiny()})
    assert engine.open_session("s", seed=7, prompt="a quiet harbour")
    return engine


def _chunk(engine: Engine) -> tuple[list[Phase], list[np.ndarray]]:
    """Every phase of one chunk; the phases run and each delivery's frames."""
    engine.begin_chunk("s", [FrameAction(keys=("w",))])
    phases, parts = [], []
    while (phase := engine.next_phase("s")) is not None:
        phases.append(phase)
        result = engine.step(StepPlan((StepItem("s", phase),)))
        assert result.results[0].error is None
        if result.results[0].chunk is not None:
            parts.append(result.results[0].chunk.frames)
    return phases, parts


def test_the_first_chunk_decodes_its_first_frame_alone_then_the_rest() -> None:
    engine = _engine(split=1)
    phases, parts = _chunk(engine)
    assert phases == [Phase.DENOISE] * 4 + [Phase.DECODE, Phase.DECODE, Phase.CACHE]
    assert [p.shape[0] for p in parts] == [1, 4]  # 2 latent frames: 1 + 4 frames, as one call gives
    phases, parts = _chunk(engine)
    assert phases == [Phase.DENOISE] * 4 + [Phase.DECODE, Phase.CACHE]  # later chunks: one call
    assert [p.shape[0] for p in parts] == [8]


def test_split_and_whole_decodes_give_identical_frames() -> None:
    split, whole = _engine(split=1), _engine(split=0)
    for _ in range(3):
        _, split_parts = _chunk(split)
        _, whole_parts = _chunk(whole)
        assert len(whole_parts) == 1
        assert np.array_equal(np.concatenate(split_parts), whole_parts[0])


def test_a_mark_after_the_first_part_waits_for_the_rest_and_rollback_restores_the_decoder() -> None:
    engine = _engine(split=1)
    engine.begin_chunk("s", [FrameAction(keys=("w",))])
    for _ in range(4):
        engine.step(StepPlan((StepItem("s", Phase.DENOISE),)))
    first = engine.step(StepPlan((StepItem("s", Phase.DECODE),))).results[0].chunk
    assert first is not None and first.frames.shape[0] == 1
    engine.mark_delivered("s", 0)  # the viewer has frame 0 only: not yet a delivered chunk
    assert engine.session("s").delivered == -1
    assert engine.rollback("s") == 0  # the chunk is dropped whole, the decoder cache as before it
    _, again = _chunk(engine)
    fresh = _engine(split=1)
    _, expected = _chunk(fresh)
    assert np.array_equal(np.concatenate(again), np.concatenate(expected))
