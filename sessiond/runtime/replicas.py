"""`ReplicaHost`: N engine replicas sharing the engine's device, each an `EngineHost` with its own
engine, engine thread and share of the KV budget (a strategy's `[engine] replicas`). It answers the
EngineHost calls the daemon makes; a session lives on one replica, chosen when it opens (the one
with the fewest sessions that has room), and every later call for it goes there. A step's entries
are split by replica and the replicas step at the same time; their outcomes are merged into one."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from engine.api import ItemResult, KVStats, ModelInfo, StepResult
from sessiond.admission.costmodel import CostModel
from sessiond.config import ServeConfig
from sessiond.runtime.engine_factory import BuiltEngine
from sessiond.runtime.engine_host import EngineHost, Entry, OpsOutcome, StepOutcome
from sessiond.runtime.strategy import ReplicaPlan
from sessiond.session.jobs import EngineOp

__all__ = ["ReplicaHost", "merge_kv"]


def merge_kv(stats: Sequence[KVStats | None]) -> KVStats | None:
    """The replicas' KV pools as one (slab counts added; every replica has the model's slab size)."""
    known = [s for s in stats if s is not None]
    if not known:
        return None
    per_session: dict[str, tuple[int, int]] = {}
    for s in known:
        per_session.update(s.per_session)
    return KVStats(slab_bytes=known[0].slab_bytes, slabs_total=sum(s.slabs_total for s in known),
                   slabs_free=sum(s.slabs_free for s in known), slabs_in_use=sum(s.slabs_in_use for s in known),
                   slabs_offloaded=sum(s.slabs_offloaded for s in known),
                   bytes_in_use=sum(s.bytes_in_use for s in known),
                   bytes_offloaded=sum(s.bytes_offloaded for s in known), per_session=per_session)


def _merge_steps(outcomes: Sequence[StepOutcome], kv: KVStats | None) -> StepOutcome:
    """One step's outcome from the replicas' (they ran at the same time: a phase took as long as
    its slowest replica, and its batch is all the replicas' items)."""
    results: list[ItemResult] = []
    seconds: dict[str, float] = {}
    sizes: dict[str, int] = {}
    failed: dict[str, str] = {}
    finished: set[str] = set()
    stepped = False
    for outcome in outcomes:
        failed.update(outcome.failed)
        finished |= outcome.finished
        if outcome.result is None:
            continue
        stepped = True
        results.extend(outcome.result.results)
        for phase, value in outcome.result.seconds.items():
            seconds[phase] = max(seconds.get(phase, 0.0), value)
        for phase, n in outcome.result.batch_sizes.items():
            sizes[phase] = sizes.get(phase, 0) + n
    result = StepResult(tuple(results), seconds, sizes) if stepped else None
    return StepOutcome(result, failed, frozenset(finished), kv)


class ReplicaHost:
    def __init__(self, plans: Sequence[ReplicaPlan], *, max_queue: int = 64) -> None:
        self.hosts = [EngineHost(max_queue=max_queue, plan=plan, name=f"sessiond-engine-{plan.index}")
                      for plan in plans]
        self._where: dict[str, int] = {}  # session id -> replica index
        self._kv: list[KVStats | None] = [None] * len(self.hosts)  # each replica's pool, as last reported

    def _pools(self, reported: Mapping[int, KVStats | None]) -> KVStats | None:
        """All the replicas' pools, with the ones that just reported updated."""
        for index, kv in reported.items():
            if kv is not None:
                self._kv[index] = kv
        return merge_kv(self._kv)

    # ---- the threads and engines ---------------------------------------------------------------
    def start(self) -> None:
        for host in self.hosts:
            host.start()

    async def stop(self) -> None:
        await asyncio.gather(*(host.stop() for host in self.hosts))

    @property
    def depth(self) -> int:
        return sum(host.depth for host in self.hosts)

    @property
    def loaded(self) -> bool:
        return all(host.loaded for host in self.hosts)

    @property
    def info(self) -> ModelInfo:
        return self.hosts[0].info

    async def load(self, config: ServeConfig) -> BuiltEngine | None:
        built = [await host.load(config) for host in self.hosts]  # one at a time: each measures what is free
        return built[0]

    async def warmup(self) -> None:
        for host in self.hosts:  # one at a time: a GPU engine compiles its kernels while it warms up
            await host.warmup()

    def context_chunks(self) -> int:
        return self.hosts[0].context_chunks()

    async def calibrate(self, **options: Any) -> CostModel:
        """Every replica profiles at the same time, so each one's profile includes the others' load
        (what they share); the first replica's cost model is the one kept."""
        models = await asyncio.gather(*(host.calibrate(**options) for host in self.hosts))
        return models[0]

    async def kv_stats(self) -> KVStats:
        stats = await asyncio.gather(*(host.kv_stats() for host in self.hosts))
        merged = self._pools(dict(enumerate(stats)))
        assert merged is not None
        return merged

    # ---- sessions ------------------------------------------------------------------------------
    def replica_of(self, session_id: str) -> int | None:
        return self._where.get(session_id)

    def sessions_per_replica(self) -> list[int]:
        counts = [0] * len(self.hosts)
        for index in self._where.values():
            counts[index] += 1
        return counts

    def _candidates(self) -> list[int]:
        """Replicas in the order a new session tries them: fewest sessions first, then by index."""
        counts = self.sessions_per_replica()
        return sorted(range(len(self.hosts)), key=lambda i: (counts[i], i))

    async def open(self, session_id: str, *, seed: int, prompt: str) -> bool:
        for index in self._candidates():
            if await self.hosts[index].open(session_id, seed=seed, prompt=prompt):
                self._where[session_id] = index
                return True
        return False

    async def open_from_snapshot(self, session_id: str, data: bytes, *, seed: int, prompt: str) -> bool:
        for index in self._candidates():
            if await self.hosts[index].open_from_snapshot(session_id, data, seed=seed, prompt=prompt):
                self._where[session_id] = index
                return True
        return False

    async def close(self, session_id: str) -> None:
        index = self._where.pop(session_id, None)
        if index is not None:
            await self.hosts[index].close(session_id)

    def _split(self, session_ids: Sequence[str]) -> dict[int, list[str]]:
        parts: dict[int, list[str]] = {}
        for sid in session_ids:
            parts.setdefault(self._where.get(sid, 0), []).append(sid)
        return parts

    async def step(self, entries: tuple[Entry, ...]) -> StepOutcome:
        by_id = {e.session_id: e for e in entries}
        parts = self._split([e.session_id for e in entries])
        outcomes = await asyncio.gather(*(self.hosts[i].step(tuple(by_id[sid] for sid in sids))
                                          for i, sids in parts.items()))
        return _merge_steps(outcomes, self._pools({i: o.kv for i, o in zip(parts, outcomes, strict=True)}))

    async def run_ops(self, ops: Mapping[str, list[EngineOp]]) -> OpsOutcome:
        parts = self._split(list(ops))
        outcomes = await asyncio.gather(*(self.hosts[i].run_ops({sid: ops[sid] for sid in sids})
                                          for i, sids in parts.items()))
        errors: dict[str, str] = {}
        snapshots: dict[str, bytes] = {}
        restore_failed: list[str] = []
        for outcome in outcomes:
            errors.update(outcome.errors)
            snapshots.update(outcome.snapshots)
            restore_failed.extend(outcome.restore_failed)
        kv = self._pools({i: o.kv for i, o in zip(parts, outcomes, strict=True)})
        return OpsOutcome(errors, snapshots, tuple(restore_failed), kv)

    async def snapshot_and_close(self, session_ids: Sequence[str]) -> dict[str, bytes]:
        parts = self._split(session_ids)
        done = await asyncio.gather(*(self.hosts[i].snapshot_and_close(sids) for i, sids in parts.items()))
        for sid in session_ids:
            self._where.pop(sid, None)
        merged: dict[str, bytes] = {}
        for snapshots in done:
            merged.update(snapshots)
        return merged
