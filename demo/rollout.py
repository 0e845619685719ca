"""Driving the real Engine for evaluation: ground-truth context in, model chunks out.

A rollout starts from chunks of the ground-truth world: their frames are encoded with the demo
autoencoder's encoder and handed to the engine as a continuation snapshot, so the engine
recomputes their K/V exactly as it would for its own chunks. From there the engine generates
chunk after chunk under the same actions and prompts the world receives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from demo.autoencoder import DemoEncoder
from demo.errors import DemoError
from engine.actions import encode_actions
from engine.api import FrameAction, Phase, StepItem, StepPlan
from engine.engine import Engine
from engine.session import ChunkRecord
from engine.snapshot import Snapshot, encode_snapshot

__all__ = ["ContextChunk", "open_with_context", "run_chunks"]


@dataclass(frozen=True)
class ContextChunk:
    """One ground-truth chunk: its frames (F, H, W, 3) uint8, the actions and prompt it was made with."""

    frames: np.ndarray
    actions: list[FrameAction]
    prompt: str


@torch.no_grad()
def encode_frames(encoder: DemoEncoder, frames: np.ndarray) -> torch.Tensor:
    """(F, H, W, 3) uint8 -> normalised latents (C, F, h, w) float32 on the CPU."""
    x = torch.from_numpy(frames).to(next(encoder.parameters()).device).permute(0, 3, 1, 2).float() / 127.5 - 1.0
    return encoder(x).float().transpose(0, 1).cpu().contiguous()


def open_with_context(engine: Engine, session_id: str, encoder: DemoEncoder, context: list[ContextChunk],
                      seed: int, prompt: str) -> None:
    """Open ``session_id`` as if it had generated ``context`` itself; its next chunk follows it."""
    c = engine.config
    records = []
    for index, chunk in enumerate(context):
        if len(chunk.frames) != c.latent_frames_per_chunk:
            raise DemoError("bad_context", f"context chunk {index} has {len(chunk.frames)} frames, "
                                           f"the model's chunks have {c.latent_frames_per_chunk}")
        actions = encode_actions(c.action_space, chunk.actions, c.latent_frames_per_chunk, c.mouse_scale)
        records.append(ChunkRecord(index, encode_frames(encoder, chunk.frames), actions, chunk.prompt))
    data = encode_snapshot(Snapshot(c.name, seed, len(context), len(context) - 1, records))
    if not engine.open_from_snapshot(session_id, data, seed=seed, prompt=prompt):
        raise DemoError("kv_full", f"the engine's KV pool has no room for session {session_id!r}")


def run_chunks(engine: Engine, actions: dict[str, list[FrameAction]]) -> dict[str, np.ndarray]:
    """Generate one chunk for every session in ``actions`` (one FrameAction per frame), stepping them
    together as one batch per phase; returns each session's frames (F, H, W, 3) uint8."""
    for session_id, frame_actions in actions.items():
        engine.begin_chunk(session_id, frame_actions)
    frames: dict[str, np.ndarray] = {}
    delivered: dict[str, int] = {}
    while True:
        items = []
        for session_id in actions:
            phase: Phase | None = engine.next_phase(session_id)
            if phase is not None:
                items.append(StepItem(session_id, phase))
        if not items:
            break
        for result in engine.step(StepPlan(tuple(items))).results:
            if result.error is not None:
                raise DemoError("engine_error", f"session {result.session_id}: {result.error}")
            if result.chunk is not None:
                frames[result.session_id] = result.chunk.frames
                delivered[result.session_id] = result.chunk.chunk_index
    for session_id, index in delivered.items():
        engine.mark_delivered(session_id, index)
    return frames
