"""`SessionEnv`: what the daemon gives every session: settings and callbacks into the daemon."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from engine.api import ActionSpace

__all__ = ["SessionEnv"]


@dataclass
class SessionEnv:
    frames_per_chunk: int
    lead_chunks: float  # world: the most chunks begun ahead of playback (the lead's ceiling)
    outbox_chunks: int
    window_frames: int
    max_actions_per_s: int
    max_pending_messages: int
    default_segment_s: float
    director_ttff_s: float
    director_lead_s: float
    action_space: ActionSpace  # the model's: every action is checked against it on arrival
    wake: Callable[[], None]  # the scheduler has work
    record_event: Callable[[str, str, dict[str, Any]], None]  # (session_id, ev, fields) -> the stored event log
    persist: Callable[[str], None]  # the durable record changed
    reserve: Callable[[str, int], Awaitable[None]]  # (session_id, position): durable before frames below it leave
    metrics: Any
    # director: (session id, segment seconds, lead-in seconds) -> seconds from `direct` until its
    # playback may start without a stall, by admission's cost model; None: no model (then
    # `director_ttff_s`). Lead-in: the media its first chunk yields fewer (a segment that starts a stream)
    plan_start: Callable[[str, float, float], float | None] = lambda sid, seconds, lead_in: None
    start_jitter_s: float = 0.1  # added to a start delay measured without a model
    # the served model's check of one decoded frame (uint8 (H, W, 3)), run off the event loop; None:
    # the model cannot check its picture (sessiond.session.picture)
    check_picture: Callable[[Any], Awaitable[Any]] | None = None
    # world: the lead follows what the session's chunks measured, under `lead_chunks`
    # (sessiond.session.lead); False: always `lead_chunks`
    adaptive_lead: bool = True
    # how many sessions the daemon holds open (this one included): a world session measures its lead
    # only while it has the engine to itself (sessiond.session.lead says why)
    open_sessions: Callable[[], int] = lambda: 1
    # frames a decoder stream's first chunk yields fewer than the others (`ModelInfo.lead_in_frames`):
    # a director segment that starts a stream is planned with that much lead-in
    lead_in_frames: int = 0
