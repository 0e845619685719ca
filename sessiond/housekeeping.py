"""Periodic and start-up chores: forgetting stale stored sessions, applying admission's answer
to sessions that use more than their prior."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from sessiond.errors import StoreUnavailable
from sessiond.lifecycle import SessionState
from sessiond.logs import log_event
from sessiond.session import EngineOp, Op, Session
from sessiond.store import Store

__all__ = ["apply_overruns", "sweep_stale"]

logger = logging.getLogger(__name__)


async def sweep_stale(store: Store, live: Mapping[str, Session], idle_close_s: float) -> int:
    """At start: forget stored sessions of an earlier process that were idle longer than
    idle_close_s (or had failed). Returns how many were removed."""
    removed = 0
    try:
        for sid in await store.list_sessions():
            record = await store.get_session(sid)
            if sid in live or record is None:
                continue
            if time.time() - record.last_active_at > idle_close_s or record.state == "failed":
                await store.delete_session(sid)
                removed += 1
                log_event("closed", sid, reason="idle while no daemon served it")
    except StoreUnavailable as exc:
        logger.warning("could not sweep stale sessions from the store: %s", exc)
    return removed


def apply_overruns(sessions: Mapping[str, Session], actions: Iterable[Any]) -> None:
    """degrade_lead: the world session keeps one chunk of lead (until admission no longer names
    it); offload_idle: an idle session's KV goes to host memory now."""
    actions = list(actions)
    degraded = {a.session_id for a in actions if a.action == "degrade_lead"}
    for sid, live in sessions.items():
        if live.lead_override is not None and sid not in degraded:
            live.lead_override = None
            log_event("lead_restored", sid)
    for action in actions:
        session = sessions.get(action.session_id)
        if session is None or session.state.terminal:
            continue
        if action.action == "degrade_lead":
            if session.lead_override is None:
                log_event("lead_degraded", session.id, duty=round(action.duty, 3), prior=action.prior)
            session.lead_override = 1.0
        elif action.action == "offload_idle" and session.state == SessionState.IDLE and session.job is None:
            session.ops.append(EngineOp(Op.OFFLOAD))
            session.set_state(SessionState.OFFLOADED, reason="overrun")
