"""Warmup: run every shape once before the engine reports ready, so no request pays for a compile
or a kernel-plan build: one session through every context length (first chunk, growing context,
full window; first and steady decodes; cache passes), then every batch size up to `max_batch`
through the fused block kernels and the decoder. Also picks the attention backend by measurement
when asked to ("auto")."""

from __future__ import annotations

import logging
from typing import Protocol

import torch

from engine._execute import PhaseRunner
from engine._setup import EngineParts
from engine.api import FrameAction, StepItem, SteppingEngine, StepPlan
from engine.attention import available_backends, measure_backends
from engine.attention_fa3 import FP8, Descale
from engine.config import ModelConfig
from engine.placement import DecodeLane
from engine.session import ChunkRecord

__all__ = ["WARMUP_SESSION", "WarmupTarget", "run_warmup"]

logger = logging.getLogger(__name__)

WARMUP_SESSION = "__warmup__"


class WarmupTarget(SteppingEngine, Protocol):
    """What warmup drives: the engine's public stepping API and its parts."""

    config: ModelConfig
    device: torch.device
    parts: EngineParts
    runner: PhaseRunner
    lane: DecodeLane  # where the decoder runs
    decode_device: torch.device

    def embed_prompt(self, prompt: str) -> torch.Tensor: ...


def _choose_attention(engine: WarmupTarget) -> None:
    parts = engine.parts
    c = parts.config
    if not parts.attend.auto or len(available_backends(engine.device, parts.dtype)) < 2:
        return
    timings = measure_backends(
        engine.device, parts.dtype, c.tokens_per_chunk, c.tokens_per_chunk * (c.context_chunks + 1),
        c.num_heads, c.head_dim,
    )
    best = min(timings, key=lambda name: timings[name])
    parts.attend.timings = timings
    parts.attend.select(best)
    logger.info("attention backend %s chosen by measurement %s", best, timings)


def _every_context_length(engine: WarmupTarget) -> None:
    for _ in range(engine.config.context_chunks + 1):
        engine.begin_chunk(WARMUP_SESSION, [FrameAction()])
        while (phase := engine.next_phase(WARMUP_SESSION)) is not None:
            result = engine.step(StepPlan((StepItem(WARMUP_SESSION, phase),)))
            errors = [r.error for r in result.results if r.error]
            if errors:
                raise RuntimeError(f"warmup failed: {errors}")


@torch.no_grad()
def _every_batch_size(engine: WarmupTarget) -> None:
    c, runner, decoder = engine.config, engine.runner, engine.parts.decoder
    latents = torch.zeros(c.in_dim, c.latent_frames_per_chunk, c.latent_height, c.latent_width, device=engine.device)
    record = ChunkRecord(0, latents, torch.zeros(c.latent_frames_per_chunk, c.action_features), "warmup")
    context = engine.embed_prompt("warmup")
    for batch in range(2, c.max_batch + 1):
        runner.forward(
            latents.expand(batch, -1, -1, -1, -1), [0.0] * batch, [record] * batch,
            context.expand(batch, -1, -1), [[] for _ in range(batch)], None,
        )
        decoded = torch.zeros(batch, c.out_dim, *latents.shape[1:], device=engine.decode_device)

        def both(decoded: torch.Tensor = decoded, batch: int = batch) -> None:
            _, caches = decoder.decode(decoded, [None] * batch)
            decoder.decode(decoded, caches)

        engine.lane.run(both)


@torch.no_grad()
def _every_attention_shape(engine: WarmupTarget) -> None:
    """Self-attention runs per group of equal context length: build every (group size, context
    length) kernel plan now, not on a live request."""
    c, parts = engine.config, engine.parts
    tokens = c.tokens_per_chunk
    attend = parts.attend
    dtype = FP8 if attend.fp8 else parts.dtype
    ones = torch.ones(c.num_heads, device=engine.device)
    descale = Descale(ones, ones, ones) if attend.fp8 else None
    for group in range(1, c.max_batch + 1):
        q = torch.zeros(group, tokens, c.num_heads, c.head_dim, device=engine.device, dtype=dtype)
        for chunks in range(1, c.context_chunks + 2):
            kv = torch.zeros(group, tokens * chunks, c.num_heads, c.head_dim, device=engine.device, dtype=dtype)
            attend(q, kv, kv, None, descale)


def run_warmup(engine: WarmupTarget) -> None:
    _choose_attention(engine)
    if not engine.open_session(WARMUP_SESSION, seed=0, prompt="warmup"):
        logger.warning("warmup skipped: the KV pool has no room for one session")
        return
    try:
        _every_context_length(engine)
        if engine.runner.graphs is not None:  # a bucket's second call captures its graph
            engine.reset(WARMUP_SESSION, seed=0, prompt="warmup")
            _every_context_length(engine)
    finally:
        engine.close_session(WARMUP_SESSION)
    if engine.device.type == "cuda" or engine.parts.model.kernels.compiled:  # plans / compiles per shape
        _every_batch_size(engine)
    if engine.device.type == "cuda":
        _every_attention_shape(engine)
    if engine.device.type == "cuda":
        torch.cuda.synchronize(engine.device)
