"""KVHandle: one session's chunk-KV: sink slabs + a ring of window slabs, with a rollback journal.

Chunk c (0-based) lives in sink slot c while c < sink, else in ring slot (c - sink) % window. When
a new chunk's ring slot still holds an older chunk that the window evicts, the evicted slab is
kept in the journal until the new chunk is delivered (so rollback can put it back with the exact
same slab id): the new chunk gets a fresh slab from the pool when one is free, otherwise the
evicted contents are copied to host memory and the slot is overwritten in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.errors import SessionStateError
from engine.kv.pool import ChunkKVPool, HostSlabs
from engine.model.masks import context_chunks

__all__ = ["JournalEntry", "KVHandle"]


@dataclass
class JournalEntry:
    chunk: int  # the undelivered chunk whose write evicted an older chunk
    slot: int  # ring slot
    old_slab: int | None  # the evicted chunk's slab, still owned by this handle
    old_host: HostSlabs | None  # or its contents on the host


@dataclass
class KVHandle:
    owner: str
    sink_chunks: int
    window_chunks: int
    max_rollback_chunks: int
    sink: list[int] = field(default_factory=list)
    ring: list[int] = field(default_factory=list)
    written: int = 0  # chunks whose K/V are in the handle (0 .. written-1)
    delivered: int = -1  # last chunk delivered to the viewer
    journal: list[JournalEntry] = field(default_factory=list)
    offloaded: HostSlabs | None = None  # all slabs while the session is off the device

    @classmethod
    def open(cls, pool: ChunkKVPool, owner: str, sink: int, window: int, max_rollback: int) -> KVHandle | None:
        ids = pool.alloc(owner, sink + window)
        if ids is None:
            return None
        return cls(owner, sink, window, max_rollback, sink=ids[:sink], ring=ids[sink:])

    # geometry -----------------------------------------------------------------------------
    def slab_of(self, chunk: int) -> int:
        if chunk < self.sink_chunks:
            return self.sink[chunk]
        return self.ring[self._slot(chunk)]

    def _slot(self, chunk: int) -> int:
        return (chunk - self.sink_chunks) % self.window_chunks

    def context_slabs(self, chunk: int) -> list[int]:
        """Slab ids of the chunks that chunk `chunk` attends to (all must be written)."""
        self._require_on_device()
        if chunk > self.written:
            raise SessionStateError("kv_gap", f"chunk {chunk} needs chunks up to {chunk - 1}; {self.written} written")
        # a write already prepared for `chunk` may have moved an evicted context chunk to the journal
        moved = {
            e.chunk - self.window_chunks: e.old_slab for e in self.journal if e.chunk >= chunk and e.old_slab is not None
        }
        return [moved.get(j, self.slab_of(j)) for j in context_chunks(chunk, self.sink_chunks, self.window_chunks)]

    def device_slabs(self) -> list[int]:
        return [*self.sink, *self.ring, *(e.old_slab for e in self.journal if e.old_slab is not None)]

    # writing --------------------------------------------------------------------------------
    def slab_for_write(self, pool: ChunkKVPool, chunk: int) -> int:
        """The slab the cache pass of `chunk` writes into (journaling what it evicts)."""
        self._require_on_device()
        if chunk != self.written:
            raise SessionStateError("kv_order", f"chunk {chunk} written out of order; next is {self.written}")
        evicted = chunk - self.window_chunks
        if chunk >= self.sink_chunks and evicted >= self.sink_chunks:
            slot = self._slot(chunk)
            fresh = pool.alloc(self.owner, 1)
            if fresh is not None:
                self.journal.append(JournalEntry(chunk, slot, self.ring[slot], None))
                self.ring[slot] = fresh[0]
            else:
                self.journal.append(JournalEntry(chunk, slot, None, pool.copy_out([self.ring[slot]])))
        return self.slab_of(chunk)

    def mark_written(self, pool: ChunkKVPool, chunk: int) -> None:
        """The cache pass of `chunk` finished writing its slab."""
        self.written = chunk + 1
        self._trim_journal(pool)

    def _trim_journal(self, pool: ChunkKVPool) -> None:
        floor = self.rollback_floor
        keep = [e for e in self.journal if e.chunk >= floor]
        for entry in self.journal[: len(self.journal) - len(keep)]:
            if entry.old_slab is not None:
                pool.free([entry.old_slab])
        self.journal = keep

    # delivery and rollback --------------------------------------------------------------------
    @property
    def rollback_floor(self) -> int:
        """The earliest chunk count rollback can return to."""
        return max(self.delivered + 1, self.written - self.max_rollback_chunks)

    def mark_delivered(self, pool: ChunkKVPool, chunk: int) -> None:
        self.delivered = max(self.delivered, chunk)
        if self.offloaded is None:
            self._trim_journal(pool)

    def rollback(self, pool: ChunkKVPool) -> int:
        """Undo every chunk written after the rollback floor; returns the new written count."""
        self._require_on_device()
        target = self.rollback_floor
        while self.journal and self.journal[-1].chunk >= target:
            entry = self.journal.pop()
            if entry.old_slab is not None:
                pool.free([self.ring[entry.slot]])
                self.ring[entry.slot] = entry.old_slab
            elif entry.old_host is not None:
                pool.copy_in([self.ring[entry.slot]], entry.old_host)
        self.written = min(self.written, target)
        return self.written

    # residency --------------------------------------------------------------------------------
    @property
    def on_device(self) -> bool:
        return self.offloaded is None

    def _require_on_device(self) -> None:
        if self.offloaded is not None:
            raise SessionStateError("offloaded", f"session {self.owner!r} is offloaded; restore it first")

    def offload(self, pool: ChunkKVPool) -> None:
        if self.offloaded is not None:
            return
        self.offloaded = pool.offload(self.owner, self.device_slabs())

    def restore(self, pool: ChunkKVPool) -> bool:
        if self.offloaded is None:
            return True
        ids = pool.restore(self.owner, self.offloaded)
        if ids is None:
            return False
        self.offloaded = None
        it = iter(ids)
        self.sink[:] = [next(it) for _ in self.sink]
        self.ring[:] = [next(it) for _ in self.ring]
        for entry in self.journal:
            if entry.old_slab is not None:
                entry.old_slab = next(it)
        return True

    def release(self, pool: ChunkKVPool) -> None:
        """Give every slab back (session closed)."""
        if self.offloaded is not None:
            pool.drop_offloaded(self.owner, self.offloaded.count)
            self.offloaded = None
        else:
            pool.free(self.device_slabs())
        self.sink.clear()
        self.ring.clear()
        self.journal.clear()
        self.written = 0
