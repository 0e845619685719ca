"""Warmup: run every shape once before ready — a first chunk, a steady chunk with context, the
cache pass, both decode kinds, and a batch of two sessions at different context lengths (so
compiled kernels have seen batch 1 and a dynamic batch) — and pick the attention backend by
measurement when asked to ("auto")."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from engine.api import FrameAction, StepItem, StepPlan
from engine.attention import measure_backends

if TYPE_CHECKING:
    from engine.engine import Engine

__all__ = ["WARMUP_SESSIONS", "run_warmup"]

logger = logging.getLogger(__name__)

WARMUP_SESSIONS = ("__warmup_a__", "__warmup_b__")


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


def _chunk(engine: Engine, sessions: tuple[str, ...]) -> None:
    for sid in sessions:
        engine.begin_chunk(sid, [FrameAction()])
    while (phase := engine.next_phase(sessions[0])) is not None:
        result = engine.step(StepPlan(tuple(StepItem(sid, phase) for sid in sessions)))
        errors = [r.error for r in result.results if r.error]
        if errors:
            raise RuntimeError(f"warmup failed: {errors}")


def run_warmup(engine: Engine) -> None:
    _choose_attention(engine)
    first, second = WARMUP_SESSIONS
    if not engine.open_session(first, seed=0, prompt="warmup"):
        logger.warning("warmup skipped: the KV pool has no room for one session")
        return
    try:
        for _ in range(engine.config.sink_chunks + 2):  # first chunk, then steady chunks with context
            _chunk(engine, (first,))
        if engine.open_session(second, seed=1, prompt="warmup"):
            _chunk(engine, (first, second))  # batch of two, different context lengths and decode kinds
        else:
            logger.warning("warmup ran batch 1 only: the KV pool has no room for two sessions")
    finally:
        for sid in WARMUP_SESSIONS:
            engine.close_session(sid)
