"""Small factories for session-level unit tests (no engine, no network)."""

from __future__ import annotations

from typing import Any

from engine.api import ActionSpace
from sessiond.metrics import Metrics
from sessiond.session import Session, SessionEnv
from sessiond.store import SessionRecord

__all__ = ["make_env", "make_session"]


async def _reserve(session_id: str, frames: int) -> None:
    return None


def make_env(**kw: Any) -> SessionEnv:
    base: dict[str, Any] = dict(
        frames_per_chunk=8, lead_chunks=2.0, outbox_chunks=4, window_frames=16, max_actions_per_s=240,
        max_pending_messages=256, default_segment_s=5.0, director_ttff_s=1.0, director_lead_s=10.0,
        action_space=ActionSpace(keys=("w", "a", "s", "d"), mouse=True, buttons=2, axes=2), wake=lambda: None,
        record_event=lambda sid, ev, fields: None, persist=lambda sid: None, reserve=_reserve,
        metrics=Metrics(), lead_in_frames=3)  # tiny's decoder: a stream's first chunk yields 5 frames of 8
    base.update(kw)
    return SessionEnv(**base)


def make_session(sid: str = "s_1", mode: str = "world", env: SessionEnv | None = None, **record: Any) -> Session:
    fields: dict[str, Any] = dict(session_id=sid, mode=mode, model="tiny", seed=1, prompt="", width=4, height=4,
                                  fps=16, token_hash="0" * 64, created_at=0.0, last_active_at=0.0,
                                  action_space={"keys": ["w", "a", "s", "d"], "mouse": True, "buttons": 2, "axes": 2})
    fields.update(record)
    return Session(SessionRecord(**fields), env or make_env(), {"session_id": sid})

