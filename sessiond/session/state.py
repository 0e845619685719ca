"""Plain state records of a session: engine operations it has queued, the chunk it has in
the engine, its director segment, and the environment the app hands it."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sessiond.session.actions import Sample

__all__ = ["ChunkJob", "EngineOp", "MediaItem", "Op", "Segment", "SessionEnv"]


class Op(enum.Enum):
    ROLLBACK = "rollback"
    RESET = "reset"
    SET_PROMPT = "set_prompt"
    MARK_DELIVERED = "mark_delivered"
    OFFLOAD = "offload"
    RESTORE = "restore"
    SNAPSHOT = "snapshot"


@dataclass(frozen=True)
class EngineOp:
    """An engine call a session needs before its next step (the scheduler runs them in order)."""

    kind: Op
    seed: int = 0
    prompt: str = ""
    chunk_index: int = -1


@dataclass
class ChunkJob:
    """A chunk this session has in the engine (or is about to begin)."""

    sample: Sample
    segment: int
    started_at: float
    deadline: float
    arrival: float = 0.0  # when the request it serves arrived (request-level FIFO orders by it)
    chunk_index: int = -1  # set once begun


@dataclass
class Segment:
    """A director segment: one per `direct`. It is `frames_target` frames long (seconds x fps):
    chunks are generated until that many frames are, and the last chunk's surplus frames are cut."""

    id: int
    re: int | None
    frames_target: int
    started_at: float
    frames_generated: int = 0  # frames of this segment put in the outbox
    start_sent: bool = False

    @property
    def complete(self) -> bool:
        return self.frames_generated >= self.frames_target


@dataclass(frozen=True)
class MediaItem:
    """Decoded frames of one chunk waiting to be handed to the connection."""

    generation: int
    chunk_index: int
    frames: np.ndarray  # uint8 (n, height, width, 3)
    segment: int
    action_seq: int


@dataclass
class SessionEnv:
    """What the app gives every session: settings and callbacks into the daemon."""

    frames_per_chunk: int
    lead_chunks: float
    outbox_chunks: int
    window_frames: int
    max_actions_per_s: int
    max_pending_messages: int
    default_segment_s: float
    director_ttff_s: float
    director_lead_s: float
    wake: Callable[[], None]  # the scheduler has work
    log_event: Callable[[str, str, dict[str, Any]], None]  # (session_id, ev, fields) -> event log
    persist: Callable[[str], None]  # the durable record changed
    metrics: Any
