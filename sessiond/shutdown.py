"""What the daemon does on its way out: snapshot live sessions into the store (a restarted
daemon resumes from them), free their engine state, and write the --record trace."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from sessiond.errors import StoreUnavailable
from sessiond.store.base import StoredEvent

if TYPE_CHECKING:
    from sessiond.daemon import Daemon

__all__ = ["release_engine_sessions", "write_recording"]

logger = logging.getLogger(__name__)


async def release_engine_sessions(daemon: Daemon) -> None:
    engine = daemon.engine
    live = [s.id for s in daemon.sessions.values() if not s.state.terminal]
    if engine is None or not live:
        return

    def snapshot_and_close() -> dict[str, bytes]:  # on the engine thread
        snapshots = {}
        for sid in live:
            try:
                snapshots[sid] = engine.snapshot(sid)
            except Exception:  # that session resumes from its last stored snapshot instead
                logger.exception("snapshot of session %s at shutdown failed", sid)
            try:
                engine.close_session(sid)
            except Exception:
                logger.exception("closing session %s at shutdown failed", sid)
        return snapshots

    for sid, data in (await daemon.worker.call(snapshot_and_close)).items():
        daemon.writer.snapshot(sid, data)
    for sid in live:
        daemon.writer.persist(sid)


async def write_recording(daemon: Daemon, path: str) -> None:
    """--record: this run's event log as a `source: "recorded"` trace (TRACES.md)."""
    from sessiond.traces.format import write_trace
    from sessiond.traces.recorder import trace_from_event_stream

    since = daemon.started_at

    async def this_run() -> AsyncIterator[StoredEvent]:
        async for event in daemon.store.iter_events():
            if event.t >= since:
                yield event

    try:
        trace = await trace_from_event_stream(this_run(), Path(path).stem)
        write_trace(trace, path)
    except (StoreUnavailable, OSError) as exc:
        logger.error("could not write the recorded trace to %s: %s", path, exc)
        return
    logger.info("recorded trace written to %s (%d events)", path, len(trace.events))
