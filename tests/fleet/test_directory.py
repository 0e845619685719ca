"""The session directory: SET NX binding, the epoch fence, capacity records that expire, lookups
for reconnects; against a real redis-server (append-only) and against the simulator's stand-in."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from fleet.directory import RedisDirectory, SessionDirectory
from fleet.errors import DirectoryUnavailable, FencedOut
from fleet.messages import Binding, WorkerCapacity
from fleet.sim.memdir import MemoryDirectory
from tests.conftest import RedisServer, find_free_port

from .conftest import append_only_redis

pytestmark = pytest.mark.redis


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def aof_redis() -> Iterator[RedisServer]:
    with append_only_redis() as server:
        yield server


_prefixes = iter(range(10**6))


def _capacity(worker: str, headroom: float = 0.5, instance_id: int = 7) -> WorkerCapacity:
    return WorkerCapacity(worker=worker, instance_id=instance_id, base_url=f"http://{worker}",
                          headroom={"world": headroom, "director": headroom}, cost={"world": 0.1, "director": 0.05},
                          kv_free_sessions=4, sessions=1, rack="r1", published_at=1.5)


@pytest.fixture(params=["redis", "memory"])
def make(request: Any, aof_redis: RedisServer) -> Callable[[], SessionDirectory]:
    """Builds the directory under test inside the test's one event loop (a Redis connection
    belongs to the loop that opened it)."""
    if request.param == "memory":
        return lambda: MemoryDirectory(Clock(), ttl_s=0.3)
    return lambda: RedisDirectory(aof_redis.url, prefix=f"t{next(_prefixes)}", ttl_s=0.3)


def run_with(make: Callable[[], SessionDirectory], scenario: Callable[[Any], Awaitable[None]]) -> Any:
    async def go() -> Any:
        directory = make()
        try:
            await scenario(directory)
        finally:
            if isinstance(directory, RedisDirectory):
                await directory.close()
        return directory
    return asyncio.run(go())


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_bind_is_set_nx_at_epoch_one(make: Callable[[], SessionDirectory]) -> None:
    async def go(directory: Any) -> None:
        assert await directory.bind("s1", "h/cuda:0", "world") == Binding("s1", "h/cuda:0", 1, "world")
        assert await directory.bind("s1", "h/cuda:1", "world") is None
        assert await directory.lookup("s1") == Binding("s1", "h/cuda:0", 1, "world")
        assert await directory.lookup("nope") is None
        assert await directory.owned_by("h/cuda:0") == ["s1"]
        assert await directory.owned_by("h/cuda:1") == []
    run_with(make, go)


def test_rebind_bumps_the_epoch_and_fences_the_old_owner(make: Callable[[], SessionDirectory]) -> None:
    async def go(directory: Any) -> None:
        old = await directory.bind("s1", "a", "director")
        assert old is not None
        moved = await directory.rebind("s1", "b", expected_epoch=1)
        assert moved == Binding("s1", "b", 2, "director")
        assert await directory.owned_by("a") == []
        assert await directory.owned_by("b") == ["s1"]
        assert await directory.owners() == ["b"]  # a owns nothing any more: not an owner
        with pytest.raises(FencedOut) as info:
            await directory.fenced_set(old, {"state": "active"})
        assert info.value.current == ("b", 2)
        with pytest.raises(FencedOut):
            await directory.release(old)
        with pytest.raises(FencedOut) as stale:  # a second re-placement racing on the old epoch loses
            await directory.rebind("s1", "c", expected_epoch=1)
        assert stale.value.current == ("b", 2)
        await directory.fenced_set(moved, {"state": "active"})
        assert (await directory.lookup("s1")) == Binding("s1", "b", 2, "director", {"state": "active"})
        await directory.release(moved)
        assert await directory.lookup("s1") is None
        assert await directory.owned_by("b") == []
        assert await directory.owners() == []
    run_with(make, go)


def test_rebind_of_an_unbound_session_is_fenced(make: Callable[[], SessionDirectory]) -> None:
    async def go(directory: Any) -> None:
        with pytest.raises(FencedOut) as info:
            await directory.rebind("ghost", "a", expected_epoch=1)
        assert info.value.current is None
    run_with(make, go)


def test_capacity_records_round_trip_and_expire(make: Callable[[], SessionDirectory]) -> None:
    async def go(directory: Any) -> None:
        await directory.publish(_capacity("a", 0.5))
        await directory.publish(_capacity("b", 0.25))
        assert [c.worker for c in await directory.workers()] == ["a", "b"]
        assert (await directory.workers())[0] == _capacity("a", 0.5)
        if isinstance(directory, MemoryDirectory):
            directory._clock.now += 0.31  # type: ignore[attr-defined]
        else:
            await asyncio.sleep(0.45)
        await directory.publish(_capacity("b", 0.2))  # b keeps publishing; a died
        assert [c.worker for c in await directory.workers()] == ["b"]
        await directory.withdraw("b")
        assert await directory.workers() == []
    run_with(make, go)


def test_ops_are_counted(make: Callable[[], SessionDirectory]) -> None:
    async def go(directory: Any) -> None:
        await directory.bind("s", "a", "world")
        await directory.lookup("s")
        await directory.publish(_capacity("a"))
    directory = run_with(make, go)
    assert (directory.ops["bind"], directory.ops["lookup"], directory.ops["publish"]) == (1, 1, 2)


def test_bindings_survive_a_redis_restart_with_append_only(aof_redis: RedisServer) -> None:
    async def before() -> None:
        d = RedisDirectory(aof_redis.url, prefix="restart")
        await d.bind("s1", "a", "world")
        await d.rebind("s1", "b", expected_epoch=1)
        await d.bind("s2", "a", "director")
        await d.close()

    run(before())
    aof_redis.kill()
    aof_redis.start()
    async def after() -> None:
        d2 = RedisDirectory(aof_redis.url, prefix="restart")
        assert await d2.lookup("s1") == Binding("s1", "b", 2, "world")
        assert await d2.lookup("s2") == Binding("s2", "a", 1, "director")
        assert await d2.owned_by("a") == ["s2"]
        await d2.close()

    run(after())


def test_an_unreachable_directory_says_where(aof_redis: RedisServer) -> None:
    url = f"redis://127.0.0.1:{find_free_port()}/0"

    async def go() -> None:
        d = RedisDirectory(url, timeout_s=0.2)
        with pytest.raises(DirectoryUnavailable, match=f"directory at {url} failed on lookup"):
            await d.lookup("s")
        await d.close()
    run(go())


def test_a_record_that_never_expires_is_refused() -> None:
    with pytest.raises(ValueError, match="ttl_s must be > 0"):
        RedisDirectory("redis://127.0.0.1:1/0", ttl_s=0)
