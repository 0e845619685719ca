"""The engine's boundary: plain data the scheduler hands in and gets back.

The scheduler never touches tensors. It opens sessions, tells the engine what conditioning
the next chunk of each session should use, and then drives one *phase* at a time for a batch
of sessions through :meth:`Engine.step`. A chunk goes through ``denoise_steps`` DENOISE
phases, one DECODE phase (latents -> uint8 RGB frames, as early as possible) and one CACHE
phase (the clean pass at t=0 that writes the chunk's K/V and finishes the chunk); always ask
``next_phase``. The scheduler may stop any session between phases.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

__all__ = [
    "ATTENTION_CHOICES",
    "ActionSpace",
    "ChunkFrames",
    "EngineProtocol",
    "FrameAction",
    "ItemResult",
    "KVStats",
    "ModelInfo",
    "Phase",
    "StepItem",
    "StepPlan",
    "StepResult",
    "SteppingEngine",
]

# the attention backends an engine can be built with ("auto": the fastest exact one, measured at warm-up)
ATTENTION_CHOICES = ("auto", "sdpa", "matmul", "flash", "fa3", "fp8", "fp8_triton")


@dataclass(frozen=True)
class ActionSpace:
    """What a model can be conditioned on; declared by the model config."""

    keys: tuple[str, ...]  # allowed key names, lower case (e.g. "w", "arrowup", "space")
    mouse: bool = True  # accumulated (dx, dy) per frame
    buttons: int = 0  # number of button bits honoured
    axes: int = 0  # number of analog axes in [-1, 1]

    def to_json(self) -> dict[str, object]:
        return {"keys": list(self.keys), "mouse": self.mouse, "buttons": self.buttons, "axes": self.axes}


@dataclass(frozen=True)
class FrameAction:
    """Conditioning for one latent frame: held keys, accumulated mouse, buttons, axes."""

    keys: tuple[str, ...] = ()
    mouse: tuple[float, float] = (0.0, 0.0)
    buttons: int = 0
    axes: tuple[float, ...] = ()


@dataclass(frozen=True)
class ModelInfo:
    name: str
    width: int
    height: int
    fps: int
    frames_per_chunk: int  # decoded video frames per chunk
    latent_frames_per_chunk: int
    denoise_steps: int
    action_space: ActionSpace
    kv_bytes_per_session: int  # device bytes a session's KV handle holds (sink + window)
    device: str
    dtype: str
    # prompts the model renders well, best first (the demo model: one per theme); () when it names none
    prompt_examples: tuple[str, ...] = ()
    # world mode: chunks a daemon should generate ahead of playback unless told otherwise; a model with
    # short chunks and CPU-cheap steps (the demo) plays with less lead and so answers keys sooner
    lead_chunks: float = 2.0
    # element type of the KV cache ("bfloat16", "float32", or "float8_e4m3fn" with attention="fp8",
    # which halves kv_bytes_per_session against bf16); "" when the engine does not say
    kv_dtype: str = ""
    # the attention backend the engine runs ("sdpa", "matmul", "fa3", ...; "" when the engine does not
    # say) and, when "auto" chose it at warm-up, each exact backend's measured milliseconds per call
    attention: str = ""
    attention_timings_ms: tuple[tuple[str, float], ...] = ()
    # video frames the first chunk of a decoder stream yields (a causal decoder's first latent frame
    # decodes to one frame: Wan 9 of 12, tiny 5 of 8; 0: a chunk of warm-up that shows nothing);
    # None: as many as the others (`frames_per_chunk`)
    first_chunk_frames: int | None = None

    @property
    def lead_in_frames(self) -> int:
        """Frames a stream's first chunk yields fewer than the others: a director segment that starts a
        stream plays its later chunks' frames that much sooner (the plan's lead-in)."""
        first = self.frames_per_chunk if self.first_chunk_frames is None else self.first_chunk_frames
        return min(self.frames_per_chunk, max(0, self.frames_per_chunk - first))


class Phase(enum.Enum):
    DENOISE = "denoise"
    CACHE = "cache"
    DECODE = "decode"


@dataclass(frozen=True)
class StepItem:
    session_id: str
    phase: Phase


@dataclass(frozen=True)
class StepPlan:
    items: tuple[StepItem, ...]


@dataclass(frozen=True)
class ChunkFrames:
    """One decoded chunk: uint8 RGB frames of shape (n, height, width, 3)."""

    chunk_index: int
    frames: np.ndarray


@dataclass(frozen=True)
class ItemResult:
    session_id: str
    phase: Phase
    chunk_index: int
    error: str | None = None  # set when this session's item failed; the others are unaffected
    chunk: ChunkFrames | None = None  # set by DECODE


@dataclass(frozen=True)
class StepResult:
    results: tuple[ItemResult, ...]
    # measured seconds per batched call, keyed "denoise", "cache", "decode"; with batch sizes
    seconds: dict[str, float] = field(default_factory=dict)
    batch_sizes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class KVStats:
    slab_bytes: int
    slabs_total: int
    slabs_free: int
    slabs_in_use: int
    slabs_offloaded: int
    bytes_in_use: int
    bytes_offloaded: int
    per_session: dict[str, tuple[int, int]]  # session id -> (slabs on device, slabs offloaded)


class SteppingEngine(Protocol):
    """Opening, stepping and closing sessions: what the engine's own warm-up and the daemon's
    start-up cost profile drive. EngineProtocol adds the rest."""

    def open_session(self, session_id: str, *, seed: int, prompt: str) -> bool:
        """Allocate the session's KV; False (never an exception) when the pool is full."""
        ...

    def close_session(self, session_id: str) -> None: ...

    def reset(self, session_id: str, *, seed: int, prompt: str) -> None:
        """Start fresh (a director `cut`): empty context, new seed."""
        ...

    def begin_chunk(self, session_id: str, actions: list[FrameAction]) -> int:
        """Start the session's next chunk with this conditioning (one entry per latent frame,
        or one for all); returns the chunk index. Draws the chunk's seeded noise."""
        ...

    def next_phase(self, session_id: str) -> Phase | None:
        """What the session's current chunk needs next; None when no chunk is in progress."""
        ...

    def step(self, plan: StepPlan) -> StepResult: ...


class EngineProtocol(SteppingEngine, Protocol):
    """What the daemon relies on. engine.Engine implements it."""

    info: ModelInfo

    def warmup(self) -> None: ...

    def set_prompt(self, session_id: str, prompt: str) -> None:
        """Applies from the next chunk begun."""
        ...

    def mark_delivered(self, session_id: str, chunk_index: int) -> None:
        """Chunks up to chunk_index reached the viewer; rollback can no longer go before it."""
        ...

    def rollback(self, session_id: str) -> int:
        """Drop chunks generated but not delivered, and any chunk in progress; restore KV,
        decoder cache and latents to the last delivered chunk. Returns the next chunk index."""
        ...

    def offload(self, session_id: str) -> None: ...

    def restore(self, session_id: str) -> bool: ...

    def snapshot(self, session_id: str) -> bytes:
        """Continuation state as safetensors bytes (latents of the context + metadata)."""
        ...

    def open_from_snapshot(self, session_id: str, data: bytes, *, seed: int, prompt: str) -> bool:
        """Open a session whose KV is recomputed from snapshot latents."""
        ...

    def kv_stats(self) -> KVStats: ...
