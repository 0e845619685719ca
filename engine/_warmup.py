"""Warmup: run every shape once (first chunk, steady chunk, cache pass, decode) before ready, and
pick the attention backend by measurement when asked to ("auto")."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from engine.api import FrameAction, StepItem, StepPlan
from engine.attention import measure_backends

if TYPE_CHECKING:
    from engine.engine import Engine

__all__ = ["WARMUP_SESSION", "run_warmup"]

logger = logging.getLogger(__name__)

WARMUP_SESSION = "__warmup__"


def _choose_attention(engine: Engine) -> None:
    parts = engine.parts
    c = parts.config
    if parts.attend.name != "sdpa" or engine.device.type != "cuda":
        return
    timings = measure_backends(
        engine.device, parts.dtype, c.tokens_per_chunk, c.tokens_per_chunk * (c.context_chunks + 1),
        c.num_heads, c.head_dim,
    )
    best = min(timings, key=lambda name: timings[name])
    parts.attend.timings = timings
    parts.attend.select(best)
    logger.info("attention backend %s chosen by measurement %s", best, timings)


def run_warmup(engine: Engine) -> None:
    _choose_attention(engine)
    if not engine.open_session(WARMUP_SESSION, seed=0, prompt="warmup"):
        logger.warning("warmup skipped: the KV pool has no room for one session")
        return
    try:
        chunks = engine.config.sink_chunks + 2  # first chunk, a steady chunk with context, decode both kinds
        for _ in range(chunks):
            engine.begin_chunk(WARMUP_SESSION, [FrameAction()])
            while (phase := engine.next_phase(WARMUP_SESSION)) is not None:
                result = engine.step(StepPlan((StepItem(WARMUP_SESSION, phase),)))
                errors = [r.error for r in result.results if r.error]
                if errors:
                    raise RuntimeError(f"warmup failed: {errors}")
    finally:
        engine.close_session(WARMUP_SESSION)
