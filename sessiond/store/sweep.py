"""At start: forget stored sessions of an earlier process that nobody will resume."""

from __future__ import annotations

import logging
import time
from collections.abc import Container

from sessiond.errors import StoreUnavailable
from sessiond.logs import log_event
from sessiond.store.base import Store

__all__ = ["sweep_stale"]

logger = logging.getLogger(__name__)


async def sweep_stale(store: Store, live: Container[str], idle_close_s: float) -> int:
    """Forget stored sessions (not in `live`) that were idle longer than idle_close_s (or had
    failed). Returns how many were removed."""
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
