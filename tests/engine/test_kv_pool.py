"""ChunkKVPool: preallocated slabs, O(1) free list, None under pressure, exact accounting."""

from __future__ import annotations

import random

import torch

from engine.kv import ChunkKVPool, KVHandle, SlabGeometry

GEOMETRY = SlabGeometry(layers=2, tokens=4, heads=2, head_dim=4, dtype=torch.float32)
SLAB = 2 * 2 * 4 * 2 * 4 * 4  # layers x K,V x tokens x heads x d x bytes


def make_pool(slabs: int = 8) -> ChunkKVPool:
    return ChunkKVPool(GEOMETRY, budget_bytes=slabs * SLAB + SLAB // 2, device=torch.device("cpu"))


def test_the_budget_decides_the_number_of_slabs() -> None:
    pool = make_pool(8)
    assert (pool.slab_bytes, pool.num_slabs, pool.free_slabs) == (SLAB, 8, 8)
    assert tuple(pool.storage.shape) == (2, 2, 8, 4, 2, 4)


def test_alloc_hands_out_lowest_ids_first_and_none_at_the_budget() -> None:
    pool = make_pool(8)
    assert pool.alloc("a", 3) == [0, 1, 2]
    assert pool.alloc("b", 5) == [3, 4, 5, 6, 7]
    assert pool.alloc("c", 1) is None
    assert pool.stats().slabs_free == 0


def test_a_request_larger_than_the_free_slabs_allocates_nothing() -> None:
    pool = make_pool(4)
    pool.alloc("a", 3)
    assert pool.alloc("b", 2) is None
    assert pool.stats().per_session == {"a": (3, 0)}


def test_freed_slabs_are_reused_last_freed_first() -> None:
    pool = make_pool(4)
    pool.alloc("a", 4)
    pool.free([1])
    pool.free([3])
    assert pool.alloc("b", 2) == [3, 1]


def test_offload_moves_bytes_to_the_host_and_restore_brings_them_back_identical() -> None:
    pool = make_pool(4)
    ids = pool.alloc("a", 2)
    assert ids == [0, 1]
    pool.storage[:, :, 0] = 1.5
    pool.storage[:, :, 1] = torch.arange(64, dtype=torch.float32).view(2, 2, 4, 2, 2).repeat(1, 1, 1, 1, 2)
    before = pool.storage[:, :, :2].clone()
    host = pool.offload("a", ids)
    stats = pool.stats()
    assert (stats.slabs_in_use, stats.slabs_offloaded, stats.bytes_offloaded) == (0, 2, 2 * SLAB)
    assert stats.per_session == {"a": (0, 2)}
    pool.alloc("b", 2)  # someone else takes slabs 1 and 0 meanwhile
    restored = pool.restore("a", host)
    assert restored == [2, 3]
    assert torch.equal(pool.storage[:, :, 2:4], before)
    assert pool.stats().per_session == {"a": (2, 0), "b": (2, 0)}


def test_restore_returns_none_when_the_pool_is_full() -> None:
    pool = make_pool(2)
    host = pool.offload("a", pool.alloc("a", 2) or [])
    pool.alloc("b", 2)
    assert pool.restore("a", host) is None
    assert pool.stats().per_session == {"a": (0, 2), "b": (2, 0)}


def test_a_thousand_random_alloc_free_offload_cycles_keep_exact_ids_and_leak_nothing() -> None:
    pool = make_pool(16)
    rng = random.Random(11)
    expected_free = list(range(15, -1, -1))  # the pool's stack, modelled
    held: dict[str, list[int]] = {}
    offloaded: dict[str, object] = {}
    for cycle in range(1000):
        owner = f"s{rng.randrange(6)}"
        op = rng.choice(["alloc", "free", "offload"])
        if owner in offloaded:
            ids = pool.restore(owner, offloaded[owner])  # type: ignore[arg-type]
            want = len(offloaded[owner].data)  # type: ignore[attr-defined]
            if want > len(expected_free):
                assert ids is None
                continue
            assert ids == [expected_free.pop() for _ in range(want)], cycle
            del offloaded[owner]
            held[owner] = ids
        elif op == "alloc":
            count = rng.randrange(1, 5)
            ids = pool.alloc(owner, count)
            if count > len(expected_free):
                assert ids is None, cycle
            else:
                assert ids == [expected_free.pop() for _ in range(count)], cycle
                held.setdefault(owner, []).extend(ids)
        elif op == "free" and held.get(owner):
            pool.free(held[owner])
            expected_free.extend(held.pop(owner))
        elif op == "offload" and held.get(owner):
            offloaded[owner] = pool.offload(owner, held[owner])
            expected_free.extend(held.pop(owner))
        stats = pool.stats()
        assert stats.slabs_free == len(expected_free)
        assert stats.slabs_in_use == sum(len(v) for v in held.values())
    for ids in held.values():
        pool.free(ids)
    for owner, host in offloaded.items():
        pool.drop_offloaded(owner, host.count)  # type: ignore[attr-defined]
    stats = pool.stats()
    assert (stats.slabs_free, stats.slabs_in_use, stats.slabs_offloaded, stats.per_session) == (16, 0, 0, {})
    assert sorted(pool._free) == list(range(16))


def test_handle_places_chunks_in_sink_then_ring_slots() -> None:
    pool = make_pool(8)
    handle = KVHandle.open(pool, "a", sink=1, window=2, max_rollback=2)
    assert handle is not None
    assert (handle.sink, handle.ring) == ([0], [1, 2])
    assert [handle.slab_of(c) for c in range(5)] == [0, 1, 2, 1, 2]


def test_handle_context_is_sink_and_the_last_window_chunks() -> None:
    pool = make_pool(8)
    handle = KVHandle.open(pool, "a", sink=1, window=2, max_rollback=2)
    assert handle is not None
    for chunk in range(4):
        handle.slab_for_write(pool, chunk)
        handle.mark_written(pool, chunk)
    # chunk 3 evicted chunk 1 from ring slot 0 into the journal and took fresh slab 3
    assert handle.ring == [3, 2]
    assert handle.context_slabs(4) == [0, 2, 3]  # chunks 0 (sink), 2 and 3


def test_handle_open_returns_none_without_partial_allocation() -> None:
    pool = make_pool(4)
    pool.alloc("x", 2)
    assert KVHandle.open(pool, "a", sink=1, window=2, max_rollback=1) is None
    assert pool.stats().per_session == {"x": (2, 0)}
