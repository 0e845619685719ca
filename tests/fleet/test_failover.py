"""Failover: a dead worker's sessions (its record expired) are re-placed at the next epoch; two
sweepers racing move each session once; sessions no worker can take wait for the next sweep."""

from __future__ import annotations

import asyncio

import pytest

from fleet.failover import FailoverMonitor
from fleet.messages import Binding, WorkerCapacity
from fleet.placement import Admitted, Placement, Refusal
from fleet.sim.memdir import MemoryDirectory


def cap(worker: str, headroom: float) -> WorkerCapacity:
    return WorkerCapacity(worker=worker, instance_id=1, base_url=f"http://{worker}",
                          headroom={"world": headroom}, cost={"world": 0.1}, kv_free_sessions=8, sessions=0)


def test_sessions_of_an_expired_worker_move_once_under_racing_sweepers() -> None:
    now = [0.0]
    directory = MemoryDirectory(lambda: now[0], ttl_s=3.0)
    room = {"b": 2, "c": 1}
    resumed: list[tuple[str, str]] = []
    abandoned: list[tuple[str, str]] = []

    async def resume(w: WorkerCapacity, sid: str) -> Admitted | Refusal:
        if room[w.worker] == 0:
            return Refusal(w.worker, 4.0, "full")
        room[w.worker] -= 1
        resumed.append((w.worker, sid))
        return Admitted(sid)

    async def abandon(w: WorkerCapacity, sid: str) -> None:
        abandoned.append((w.worker, sid))

    async def scenario() -> None:
        for sid in ("s1", "s2", "s3", "s4"):
            await directory.bind(sid, "a", "world")
        monitors = [FailoverMonitor(directory, Placement(directory, clock=lambda: now[0]), resume, abandon)
                    for _ in range(2)]
        for c in (cap("a", 0.1), cap("b", 0.8), cap("c", 0.5)):
            await directory.publish(c)
        assert [(await m.sweep()).dead for m in monitors] == [[], []]
        now[0] = 2.0  # b and c keep publishing; a stopped at t=0 and expires at t=3
        await directory.publish(cap("b", 0.8))
        await directory.publish(cap("c", 0.5))
        assert (await monitors[0].sweep()).dead == []
        now[0] = 3.0
        first, second = await monitors[0].sweep(), await monitors[1].sweep()
        assert first.dead == ["a"] and second.dead == ["a"]
        assert first.moved == {"s1": "b", "s2": "b", "s3": "c"}
        assert first.stranded == {"s4": "a"}
        assert second.moved == {} and second.raced == []  # nothing was left for it but s4, and no room
        assert second.stranded == {"s4": "a"}
        assert await directory.lookup("s1") == Binding("s1", "b", 2, "world")
        assert await directory.lookup("s4") == Binding("s4", "a", 1, "world")
        room["c"] = 1  # a session closed on c: the next sweep moves the stranded one
        now[0] = 4.0
        await directory.publish(cap("b", 0.6))
        await directory.publish(cap("c", 0.4))
        again = await monitors[0].sweep()
        assert again.dead == ["a"] and again.moved == {"s4": "c"}
        assert await directory.owned_by("a") == []
        assert (await monitors[0].sweep()).dead == []

    asyncio.run(scenario())
    assert sorted(resumed) == [("b", "s1"), ("b", "s2"), ("c", "s3"), ("c", "s4")]
    assert abandoned == []


def test_a_worker_dead_before_the_monitor_started_is_found_by_the_orphan_scan() -> None:
    """No record of `gone` was ever seen: the first sweep's scan of the owners finds its sessions,
    and a later death of a worker this monitor never saw is found on the next scan."""
    now = [0.0]
    directory = MemoryDirectory(lambda: now[0], ttl_s=3.0)
    moved: list[tuple[str, str]] = []

    async def resume(w: WorkerCapacity, sid: str) -> Admitted | Refusal:
        moved.append((w.worker, sid))
        return Admitted(sid)

    async def abandon(w: WorkerCapacity, sid: str) -> None:
        raise AssertionError("nothing races here")

    async def scenario() -> None:
        for sid in ("s1", "s2"):
            await directory.bind(sid, "gone", "world")
        await directory.publish(cap("b", 0.8))
        monitor = FailoverMonitor(directory, Placement(directory, clock=lambda: now[0]), resume, abandon,
                                  orphan_scan_every=3)
        first = await monitor.sweep()
        assert first.dead == ["gone"] and first.moved == {"s1": "b", "s2": "b"}
        assert await directory.owners() == ["b"]
        await directory.bind("s3", "unseen", "world")  # a worker whose record this monitor never read
        assert (await monitor.sweep()).dead == []  # sweeps 2 and 3 do not scan
        assert (await monitor.sweep()).dead == []
        fourth = await monitor.sweep()
        assert fourth.dead == ["unseen"] and fourth.moved == {"s3": "b"}
        assert await directory.lookup("s3") == Binding("s3", "b", 2, "world")

    asyncio.run(scenario())
    assert moved == [("b", "s1"), ("b", "s2"), ("b", "s3")]
    with pytest.raises(ValueError, match="orphan_scan_every must be >= 1"):
        FailoverMonitor(directory, Placement(directory), resume, abandon, orphan_scan_every=0)
