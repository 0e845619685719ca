"""Session-scoped chunk-KV: the slab pool and per-session handles."""

from engine.kv.handle import JournalEntry, KVHandle
from engine.kv.pool import ChunkKVPool, HostSlabs, SlabGeometry

__all__ = ["ChunkKVPool", "HostSlabs", "JournalEntry", "KVHandle", "SlabGeometry"]
