"""What a session asks of the engine: the operations it has queued (run by the scheduler
between steps, in order) and the chunk it has in the engine."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from engine.api import FrameAction

__all__ = ["ChunkJob", "EngineOp", "Op"]


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
    """A chunk this session has in the engine (or is about to begin), conditioned on `action`
    (the session's action timeline sampled at the chunk boundary; `action_seq` is the newest
    action merged into it, -1 if none ever)."""

    action: FrameAction
    action_seq: int
    segment: int
    started_at: float
    deadline: float
    arrival: float = 0.0  # when the request it serves arrived (request-level FIFO orders by it)
    players: tuple[int, ...] | None = None  # co-play: each player's newest action merged in (index = player)
    start_by: float | None = None  # world: when the lead said to begin it; None: not a steady chunk (the
    # session's first, or the first after its clock re-anchored), whose need says nothing of the lead
