"""Handing sessions to another daemon (a fleet moves them when this one drains): stop serving them
here while their durable records and continuation snapshots stay in the shared store, so the daemon
that takes over resumes them with pts continuing.

`hand_off` freezes sessions: nothing more is generated or sent, unsent frames are dropped (so the
stored pts position, the record's and the durable one alike, is exactly what the viewer got), the
engine state is snapshotted and freed, and the record and snapshot are written to the store before it returns. The connection stays open until
`let_go` tells the viewer where the session went (`moved`) and ends it. `drop_duplicate` lets go of
a session this daemon resumed but does not own (another daemon won it): it writes nothing.
`checkpoint` queues a continuation snapshot of every generating session: a fleet worker does it every
few seconds, so a session whose worker dies resumes elsewhere from recent latents."""

from __future__ import annotations

import logging

from protocols.messages import Moved
from sessiond.logs import log_event
from sessiond.runtime.daemon import Daemon
from sessiond.session import Session
from sessiond.store.base import SessionRecord

__all__ = ["checkpoint", "drop_duplicate", "hand_off", "let_go"]

logger = logging.getLogger(__name__)


def _freeze(daemon: Daemon, session: Session) -> None:
    daemon.sessions.pop(session.id, None)  # the scheduler no longer sees it: nothing more is generated
    session.freeze()
    daemon.handed_off[session.id] = session
    daemon.release(session.id)


async def hand_off(daemon: Daemon, session_ids: list[str]) -> list[str]:
    """Freeze these live sessions and write their records and snapshots to the store; returns the
    ids frozen. Raises StoreUnavailable when the store refuses the writes (the sessions stay frozen:
    their last records in the store are at most the writer's interval old)."""
    frozen = [s for sid in session_ids if (s := daemon.sessions.get(sid)) is not None and not s.state.terminal]
    for session in frozen:
        _freeze(daemon, session)
    ids = [s.id for s in frozen]
    snapshots = await daemon.host.snapshot_and_close(ids) if daemon.host.loaded and ids else {}
    for session in frozen:
        if session.id in snapshots:
            await daemon.store.put_snapshot(session.id, snapshots[session.id])
        await daemon.store.put_session(SessionRecord.from_json(session.record.to_json()))
        # the durable position was reserved up to the end of the chunk handed out; the frames of it
        # not sent were dropped, so the position comes back to exactly what left: the next daemon
        # resumes at the next undelivered frame whichever way it resumes (a control call, or a
        # viewer's connect, which reads the position)
        await daemon.positions.close(session.id)
        await daemon.store.put_position(session.id, session.record.frames_sent)
        log_event("handed_off", session.id, frames_sent=session.record.frames_sent,
                  snapshot=session.id in snapshots)
    return ids


def let_go(daemon: Daemon, session_id: str, moved: Moved | None) -> bool:
    """End a frozen session's connection here, after telling the viewer where it went (when known).
    False when this daemon holds no such frozen session."""
    session = daemon.handed_off.pop(session_id, None)
    if session is None:
        return False
    session.move_away(moved)
    log_event("moved", session_id, to=moved.ws_url if moved else None)
    return True


async def drop_duplicate(daemon: Daemon, session_id: str) -> bool:
    """Forget a live session this daemon does not own any more, writing nothing to the store (its
    owner writes it). False when it is not live here."""
    session = daemon.sessions.pop(session_id, None)
    if session is None:
        return False
    session.close()
    daemon.release(session_id)
    if daemon.host.loaded:
        try:
            await daemon.host.close(session_id)
        except Exception:  # the session is gone here either way
            logger.exception("engine close of duplicate %s failed", session_id)
    log_event("dropped_duplicate", session_id)
    return True


def checkpoint(daemon: Daemon) -> int:
    """Queue a snapshot of each active session (its finished chunks' latents; the scheduler runs it
    between steps and the store writer stores it). Returns how many were queued."""
    queued = sum(session.snapshot() for session in daemon.sessions.values())
    if queued and daemon.scheduler is not None:
        daemon.scheduler.wake()
    return queued
