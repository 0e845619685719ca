"""`ReplicaHost` over two real tiny engines: a session opens on the replica with the fewest
sessions that has room, every later call goes there, a step's sessions are split by replica and
merged back, and the KV pools are reported as one."""

from __future__ import annotations

from engine.api import FrameAction
from engine.engine import Engine
from sessiond.runtime.engine_host import EngineHost, Entry
from sessiond.runtime.replicas import ReplicaHost
from sessiond.runtime.strategy import ReplicaPlan


def _replicas(sessions: tuple[int, int]) -> tuple[ReplicaHost, list[Engine]]:
    probe = Engine.create(model="tiny", device="cpu")
    per_session = probe.info.kv_bytes_per_session
    engines = [Engine.create(model="tiny", device="cpu", kv_budget_bytes=n * per_session) for n in sessions]
    host = ReplicaHost([ReplicaPlan(i, None, None, "inline", None, None) for i in range(2)])
    host.hosts = [EngineHost(e, name=f"test-replica-{i}") for i, e in enumerate(engines)]
    host.start()
    return host, engines


async def test_sessions_go_to_the_replica_with_the_fewest_that_has_room() -> None:
    host, engines = _replicas((1, 2))
    try:
        opened = [await host.open(sid, seed=1, prompt="x") for sid in ("a", "b", "c", "d")]
        assert opened == [True, True, True, False]  # d: both replicas are full
        assert [host.replica_of(sid) for sid in ("a", "b", "c", "d")] == [0, 1, 1, None]
        assert host.sessions_per_replica() == [1, 2]
        assert engines[0].has_session("a") and not engines[0].has_session("b")
        kv = await host.kv_stats()
        assert (kv.slabs_total, kv.slabs_free) == (sum(e.kv_stats().slabs_total for e in engines), 0)
        await host.close("b")
        assert host.sessions_per_replica() == [1, 1] and not engines[1].has_session("b")
        assert await host.open("e", seed=2, prompt="y") and host.replica_of("e") == 1
    finally:
        await host.stop()


async def test_a_step_runs_each_session_on_its_replica_and_merges_the_outcomes() -> None:
    host, engines = _replicas((2, 2))
    try:
        for sid in ("a", "b"):
            assert await host.open(sid, seed=3, prompt="x")
        outcome = await host.step((Entry("a", FrameAction()), Entry("b", FrameAction())))
        assert outcome.failed == {}
        assert outcome.result is not None
        assert sorted(r.session_id for r in outcome.result.results) == ["a", "b"]
        assert outcome.result.batch_sizes == {"denoise": 2}  # one session on each replica, one step each
        assert engines[0].session("a").work is not None and engines[1].session("b").work is not None
        assert outcome.kv is not None and outcome.kv.slabs_total == sum(e.kv_stats().slabs_total for e in engines)
        snapshots = await host.snapshot_and_close(["a", "b"])
        assert sorted(snapshots) == ["a", "b"] and host.sessions_per_replica() == [0, 0]
    finally:
        await host.stop()
