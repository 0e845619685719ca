"""Placement: ordered by predicted headroom, each worker's admission asked in that order, the first
that admits is bound; a refusal only when every worker refuses, with the smallest retry-after."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from fleet.errors import FencedOut, NoWorkerAdmits, WorkerUnreachable
from fleet.messages import Binding, WorkerCapacity
from fleet.placement import Admitted, Placement, Refusal, order_workers
from fleet.sim.memdir import MemoryDirectory


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def cap(worker: str, world: float, director: float | None = None, *, sessions: int = 0, kv: int = 4,
        draining: bool = False, cost: float = 0.2) -> WorkerCapacity:
    return WorkerCapacity(worker=worker, instance_id=hash(worker) % 1000, base_url=f"http://{worker}",
                          headroom={"world": world, "director": world if director is None else director},
                          cost={"world": cost, "director": cost / 2}, kv_free_sessions=kv, sessions=sessions,
                          draining=draining)


def setup(*caps: WorkerCapacity) -> tuple[Placement, MemoryDirectory, Clock]:
    clock = Clock()
    directory = MemoryDirectory(clock, ttl_s=3.0)
    for c in caps:
        asyncio.run(directory.publish(c))
    return Placement(directory, clock=clock, wall_clock=clock), directory, clock


class Workers:
    """Scripted workers: each answers admit or refuse(retry) or raises unreachable; records who was asked."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.asked: list[str] = []
        self.n = 0

    async def __call__(self, w: WorkerCapacity) -> Admitted | Refusal:
        self.asked.append(w.worker)
        answer = self.answers[w.worker]
        if answer == "down":
            raise WorkerUnreachable(f"{w.worker} did not answer")
        if isinstance(answer, float):
            return Refusal(w.worker, answer, "over budget")
        if isinstance(answer, tuple):  # (retry-after, the body's reason)
            return Refusal(w.worker, answer[0], "refused", answer[1])
        self.n += 1
        return Admitted(f"s{self.n}", {"session_id": f"s{self.n}", "ws_url": f"ws://{w.worker}/s{self.n}"})


def test_order_is_headroom_for_the_mode_then_fewer_sessions_then_key() -> None:
    workers = [cap("a", 0.3, 0.9), cap("b", 0.6, 0.1), cap("c", 0.6, 0.1, sessions=1), cap("d", 0.9, draining=True),
               cap("e", 0.95, kv=0), cap("f", 0.0)]
    assert [w.worker for w in order_workers(workers, "world")] == ["b", "c", "a", "e", "f"]
    assert [w.worker for w in order_workers(workers, "director")] == ["a", "b", "c", "e", "f"]
    assert [w.worker for w in order_workers(workers, "world", frozenset({"b"}))] == ["c", "a", "e", "f"]


def test_the_first_admitting_worker_by_headroom_is_bound() -> None:
    placement, directory, _ = setup(cap("a", 0.2), cap("b", 0.7), cap("c", 0.5))
    ask = Workers({"a": "ok", "b": 2.0, "c": "ok"})
    placed = asyncio.run(placement.place("world", ask))
    assert ask.asked == ["b", "c"]
    assert placed.binding == Binding("s1", "c", 1, "world")
    assert placed.response["ws_url"] == "ws://c/s1"
    assert placed.asked == 2
    assert asyncio.run(directory.lookup("s1")) == Binding("s1", "c", 1, "world")


def test_every_refusal_gives_the_smallest_retry_after() -> None:
    placement, directory, _ = setup(cap("a", 0.2), cap("b", 0.7), cap("c", 0.5))
    ask = Workers({"a": 4.0, "b": 9.0, "c": "down"})
    with pytest.raises(NoWorkerAdmits) as info:
        asyncio.run(placement.place("director", ask))
    assert ask.asked == ["b", "c", "a"]
    assert info.value.retry_after_s == 4.0
    assert info.value.reasons == ["b: over budget", "c: c did not answer", "a: over budget"]
    assert directory.ops["bind"] == 0


def test_the_refusal_names_the_workers_reason_only_when_they_all_gave_the_same_one() -> None:
    placement, _, _ = setup(cap("a", 0.2), cap("b", 0.7))
    with pytest.raises(NoWorkerAdmits) as info:
        asyncio.run(placement.place("world", Workers({"a": (1.0, "not_ready"), "b": (1.0, "not_ready")})))
    assert info.value.reason == "not_ready"
    for answers in ({"a": (1.0, "not_ready"), "b": (20.0, "load")}, {"a": (1.0, "not_ready"), "b": "down"}):
        with pytest.raises(NoWorkerAdmits) as info:
            asyncio.run(placement.place("world", Workers(answers)))
        assert info.value.reason is None


def test_no_live_worker_is_a_refusal_with_the_default_retry() -> None:
    placement, _, _ = setup()
    with pytest.raises(NoWorkerAdmits, match="no live worker") as info:
        asyncio.run(placement.place("world", Workers({})))
    assert info.value.retry_after_s == 5.0


def test_local_debits_spread_creates_between_records() -> None:
    # b has the most headroom, but each session takes 0.2 of it: the third create goes to a
    placement, _, _ = setup(cap("a", 0.5), cap("b", 0.8))
    ask = Workers({"a": "ok", "b": "ok"})
    bound = [asyncio.run(placement.place("world", ask)).binding.worker for _ in range(4)]
    assert bound == ["b", "b", "a", "b"]  # b 0.8 -> 0.6 -> 0.4 < a 0.5 -> a 0.3 < b 0.4


def test_a_re_read_record_keeps_the_debits_made_after_it_was_published() -> None:
    # records are re-read every second, workers publish every second: a record read right after a
    # placement does not count that session yet, so the placer keeps its own debit on top of it
    placement, directory, clock = setup(cap("a", 0.5), cap("b", 0.5), cap("c", 0.5))  # published at 0
    ask = Workers({"a": "ok", "b": "ok", "c": "ok"})
    clock.now = 0.1
    first = [asyncio.run(placement.place("world", ask)).binding.worker for _ in range(3)]
    assert first == ["a", "b", "c"]
    clock.now = 1.2  # a fresh view of the same records: each keeps its debit of 0.2
    assert {w.worker: w.headroom["world"] for w in asyncio.run(placement.view())} == pytest.approx(
        {"a": 0.3, "b": 0.3, "c": 0.3})
    asyncio.run(directory.publish(replace(cap("a", 0.3, sessions=1), published_at=1.5)))  # a's record counts it
    clock.now = 2.3
    view = {w.worker: w for w in asyncio.run(placement.view())}
    assert {k: w.headroom["world"] for k, w in view.items()} == pytest.approx({"a": 0.3, "b": 0.3, "c": 0.3})
    assert {k: w.sessions for k, w in view.items()} == {"a": 1, "b": 1, "c": 1}  # a's not counted twice
    second = [asyncio.run(placement.place("world", ask)).binding.worker for _ in range(3)]
    assert second == ["a", "b", "c"]  # two by two, as with records that were never stale


def test_debits_older_than_the_memory_are_dropped() -> None:
    placement, _, clock = setup(cap("a", 0.5))
    placement.debit_memory_s = 2.0
    clock.now = 0.1
    asyncio.run(placement.place("world", Workers({"a": "ok"})))
    clock.now = 2.5  # the record (published at 0) was not renewed, and the debit is 2.4 s old
    assert [w.headroom["world"] for w in asyncio.run(placement.view())] == [0.5]


def test_a_refusing_worker_is_not_asked_first_again_until_its_next_record() -> None:
    placement, _, clock = setup(cap("a", 0.5), cap("b", 0.8))
    ask = Workers({"a": "ok", "b": 1.0})
    asyncio.run(placement.place("world", ask))
    asyncio.run(placement.place("world", ask))
    assert ask.asked == ["b", "a", "a"]
    clock.now += 1.0  # a fresh view: b's record still says 0.8
    asyncio.run(placement.place("world", ask))
    assert ask.asked[-2:] == ["b", "a"]


def test_max_asks_bounds_the_calls_per_create() -> None:
    placement, _, _ = setup(*(cap(f"w{i}", 0.1 * i) for i in range(1, 10)))
    placement.max_asks = 3
    ask = Workers({f"w{i}": 2.0 + i for i in range(1, 10)})
    with pytest.raises(NoWorkerAdmits) as info:
        asyncio.run(placement.place("world", ask))
    assert ask.asked == ["w9", "w8", "w7"]
    assert info.value.retry_after_s == 9.0


def test_replace_moves_the_binding_to_another_worker_at_the_next_epoch() -> None:
    placement, directory, _ = setup(cap("a", 0.9), cap("b", 0.3), cap("c", 0.6))
    asyncio.run(directory.bind("s9", "a", "world"))
    old = Binding("s9", "a", 1, "world")
    asked: list[str] = []

    async def resume(w: WorkerCapacity) -> Admitted | Refusal:
        asked.append(w.worker)
        return Admitted("s9", {"worker": w.worker})

    async def abandon(w: WorkerCapacity, sid: str) -> None:
        raise AssertionError("nothing to abandon")

    placed = asyncio.run(placement.replace_session(old, resume, abandon))
    assert asked == ["c"]  # never the worker it leaves
    assert placed.binding == Binding("s9", "c", 2, "world")
    assert asyncio.run(directory.owned_by("a")) == []


def test_a_racing_replacement_loses_to_the_fence_and_abandons_its_copy() -> None:
    placement, directory, _ = setup(cap("b", 0.3), cap("c", 0.6))
    asyncio.run(directory.bind("s9", "a", "world"))
    asyncio.run(directory.rebind("s9", "b", 1))  # another gateway already moved it to b
    abandoned: list[tuple[str, str]] = []

    async def resume(w: WorkerCapacity) -> Admitted | Refusal:
        return Admitted("s9")

    async def abandon(w: WorkerCapacity, sid: str) -> None:
        abandoned.append((w.worker, sid))

    with pytest.raises(FencedOut):
        asyncio.run(placement.replace_session(Binding("s9", "a", 1, "world"), resume, abandon))
    assert abandoned == [("c", "s9")]
    assert asyncio.run(directory.lookup("s9")) == Binding("s9", "b", 2, "world")


def test_max_asks_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_asks must be >= 1"):
        Placement(MemoryDirectory(Clock()), max_asks=0)
