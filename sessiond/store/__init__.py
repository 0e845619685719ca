"""Session stores behind one interface: in-memory (default) and Redis."""

from __future__ import annotations

from sessiond.store.base import EVENT_KINDS, SessionRecord, Store, StoredEvent
from sessiond.store.memory import MemoryStore

__all__ = ["EVENT_KINDS", "MemoryStore", "SessionRecord", "Store", "StoredEvent", "open_store"]


def open_store(redis_url: str | None) -> Store:
    """The Redis store for a URL, else the memory store (Redis is imported only when used)."""
    if redis_url:
        from sessiond.store.redis_store import RedisStore

        return RedisStore(redis_url)
    return MemoryStore()
