"""`--record FILE`: this run's event log written at shutdown as a `source: "recorded"` trace
(docs/traces.md)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

from sessiond.errors import StoreUnavailable
from sessiond.store import Store
from sessiond.store.base import StoredEvent

__all__ = ["write_recording"]

logger = logging.getLogger(__name__)


async def write_recording(store: Store, since: float, path: str) -> None:
    """The events stored since `since` (wall clock) as a trace at `path`; a failure is logged."""
    from sessiond.traces.format import write_trace
    from sessiond.traces.recorder import trace_from_event_stream

    async def this_run() -> AsyncIterator[StoredEvent]:
        async for event in store.iter_events():
            if event.t >= since:
                yield event

    try:
        trace = await trace_from_event_stream(this_run(), Path(path).stem)
        write_trace(trace, path)
    except (StoreUnavailable, OSError) as exc:
        logger.error("could not write the recorded trace to %s: %s", path, exc)
        return
    logger.info("recorded trace written to %s (%d events)", path, len(trace.events))
