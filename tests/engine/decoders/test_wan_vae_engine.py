"""The Wan VAE decoder inside the engine: streamed frames, and rollback restores its cache."""

from __future__ import annotations

import numpy as np

from engine.api import FrameAction, StepItem, StepPlan
from engine.config import tiny_config
from engine.decoders.wan_vae import WanVAEConfig, WanVAEDecoder
from engine.engine import Engine

MODEL = "tiny+wan-vae-test"


def _engine() -> Engine:
    config = tiny_config().with_overrides(name=MODEL, decoder_kind="wan_vae", extra={"wan_vae": WanVAEConfig.tiny()})
    return Engine.create(model=config, device="cpu")


def _chunk(engine: Engine, sid: str) -> np.ndarray:
    """Run one chunk through every phase the engine asks for; its decoded frames."""
    engine.begin_chunk(sid, [FrameAction(keys=("w",))])
    frames = []
    while (phase := engine.next_phase(sid)) is not None:
        result = engine.step(StepPlan((StepItem(sid, phase),)))
        assert result.results[0].error is None
        chunk = result.results[0].chunk
        if chunk is not None:
            frames.append(chunk.frames)
    assert len(frames) == 1
    return frames[0]


def test_the_engine_decodes_wan_vae_frames_chunk_by_chunk() -> None:
    engine = _engine()
    assert isinstance(engine.parts.decoder, WanVAEDecoder)
    assert engine.open_session("s", seed=7, prompt="a quiet harbour")
    first, second = _chunk(engine, "s"), _chunk(engine, "s")
    assert first.shape == (5, 32, 32, 3) and second.shape == (8, 32, 32, 3)  # 2 latent frames per chunk
    assert first.dtype == second.dtype == np.uint8


def test_rollback_restores_the_decoder_cache_so_the_chunk_decodes_identically() -> None:
    engine = _engine()
    assert engine.open_session("s", seed=7, prompt="a quiet harbour")
    _chunk(engine, "s")
    engine.mark_delivered("s", 0)
    undelivered = _chunk(engine, "s")
    assert engine.rollback("s") == 1
    assert np.array_equal(_chunk(engine, "s"), undelivered)
