"""`EngineHost`: the one owner of the engine and of the thread it runs on.

Every engine call of the daemon is a typed async method here; the work runs on the engine's own
thread (`EngineWorker`), so the event loop never touches the GPU and the engine is only ever
touched by one thread. Faults are isolated per session: an exception from one session's call
becomes that session's error string and never touches the others."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from engine.api import (
    EngineProtocol,
    FrameAction,
    ItemResult,
    KVStats,
    ModelInfo,
    StepItem,
    StepPlan,
    StepResult,
)
from sessiond.admission.calibrate import calibrate
from sessiond.admission.costmodel import CostModel
from sessiond.config import ServeConfig
from sessiond.runtime.engine_factory import BuiltEngine, build_engine
from sessiond.runtime.engine_worker import EngineWorker
from sessiond.runtime.strategy import ReplicaPlan
from sessiond.session.jobs import EngineOp, Op

__all__ = ["EngineHost", "Entry", "OpsOutcome", "StepHost", "StepOutcome", "run_ops", "run_step"]

logger = logging.getLogger(__name__)

_DEFAULT_CONTEXT_CHUNKS = 3  # an engine that does not say how long its attention context is
_LEFTOVER_PHASES = 16


@dataclass(frozen=True)
class Entry:
    """One session in a step: `begin` is the conditioning of a new chunk to begin first."""

    session_id: str
    begin: FrameAction | None


@dataclass(frozen=True)
class StepOutcome:
    """One step as the scheduler reads it: the engine's own StepResult (None when no engine step
    ran), the sessions that failed and why (skip their items in `result.results`), the sessions
    whose chunk is finished, and the KV pool after the step."""

    result: StepResult | None
    failed: dict[str, str]
    finished: frozenset[str]
    kv: KVStats | None

    def chunks(self) -> list[ItemResult]:
        """The items of sessions that did not fail, in step order."""
        items = self.result.results if self.result is not None else ()
        return [item for item in items if item.session_id not in self.failed]


@dataclass(frozen=True)
class OpsOutcome:
    errors: dict[str, str]  # session id -> what failed
    snapshots: dict[str, bytes]
    restore_failed: tuple[str, ...]
    kv: KVStats | None


class StepHost(Protocol):
    """What the scheduler drives: an `EngineHost`, or the replicas' (`sessiond.runtime.replicas`)."""

    @property
    def depth(self) -> int: ...

    async def step(self, entries: tuple[Entry, ...]) -> StepOutcome: ...

    async def run_ops(self, ops: Mapping[str, list[EngineOp]]) -> OpsOutcome: ...


class EngineHost:
    """Owns the engine (given, or built from the config by `load`) and its thread."""

    def __init__(self, engine: EngineProtocol | None = None, *, max_queue: int = 64, plan: ReplicaPlan | None = None,
                 name: str = "sessiond-engine") -> None:
        self._engine = engine
        self._plan = plan  # a strategy's replica: what `load` builds (None: the configured engine)
        self._worker = EngineWorker(max_queue=max_queue, name=name)

    # ---- the thread --------------------------------------------------------------------------
    def start(self) -> None:
        self._worker.start()

    async def stop(self) -> None:
        await self._worker.stop()

    @property
    def depth(self) -> int:
        """Calls waiting for the engine thread."""
        return self._worker.depth

    # ---- the engine ----------------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        return self._engine is not None

    @property
    def info(self) -> ModelInfo:
        return self._require().info

    def _require(self) -> EngineProtocol:
        if self._engine is None:
            raise RuntimeError("the engine is not loaded yet; await EngineHost.load() first")
        return self._engine

    async def load(self, config: ServeConfig) -> BuiltEngine | None:
        """Build the configured engine on its thread unless one was given; None when given."""
        if self._engine is not None:
            return None
        built = await self._worker.call(build_engine, config, self._plan)
        self._engine = built.engine
        return built

    async def warmup(self) -> None:
        engine = self._require()
        if not getattr(engine, "ready", False):
            await self._worker.call(engine.warmup)

    def placement_words(self) -> str:
        """Where the engine's decoder runs, as the engine says (engine.placement), else in line."""
        engine = self._require()
        placement, device = getattr(engine, "placement", None), getattr(engine, "device", None)
        if placement is None or device is None:
            return "in line on the engine's stream"
        return str(placement.describe(device))

    def context_chunks(self) -> int:
        """Sink + window chunks of the model (steady cost is only reached once the context is full)."""
        config = getattr(self._require(), "config", None)
        sink, window = getattr(config, "sink_chunks", None), getattr(config, "window_chunks", None)
        if isinstance(sink, int) and isinstance(window, int) and sink + window > 0:
            return sink + window
        return _DEFAULT_CONTEXT_CHUNKS

    async def calibrate(self, *, batches: Sequence[int], chunks: int, rounds: int,
                        time_budget_s: float | None, context_chunks: int | None = None,
                        steady_chunks: int = 0, cpu_time: bool = False,
                        enough: Callable[[int, CostModel], bool] | None = None) -> CostModel:
        """The start-up profile through the engine, filling a cost model (`enough`: asked on the engine
        thread after each batch size whether the profile may end there)."""
        return await self._worker.call(calibrate, self._require(), batches=batches, chunks=chunks, rounds=rounds,
                                       time_budget_s=time_budget_s, context_chunks=context_chunks,
                                       steady_chunks=steady_chunks, cpu_time=cpu_time, enough=enough)

    async def kv_stats(self) -> KVStats:
        return await self._worker.call(self._require().kv_stats)

    # ---- sessions ------------------------------------------------------------------------------
    async def open(self, session_id: str, *, seed: int, prompt: str) -> bool:
        """False when the KV pool has no room for it."""
        return await self._worker.call(self._require().open_session, session_id, seed=seed, prompt=prompt)

    async def open_from_snapshot(self, session_id: str, data: bytes, *, seed: int, prompt: str) -> bool:
        return await self._worker.call(self._require().open_from_snapshot, session_id, data, seed=seed,
                                       prompt=prompt)

    async def close(self, session_id: str) -> None:
        await self._worker.call(self._require().close_session, session_id)

    async def step(self, entries: tuple[Entry, ...]) -> StepOutcome:
        return await self._worker.call(run_step, self._require(), entries)

    async def run_ops(self, ops: Mapping[str, list[EngineOp]]) -> OpsOutcome:
        return await self._worker.call(run_ops, self._require(), ops)

    async def snapshot_and_close(self, session_ids: Sequence[str]) -> dict[str, bytes]:
        """At shutdown: each session's snapshot (those that fail are left out), then its engine state freed."""
        return await self._worker.call(_snapshot_and_close, self._require(), tuple(session_ids))


# ---- what runs ON the engine thread ----------------------------------------------------------
def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _safe_kv(engine: EngineProtocol) -> KVStats | None:
    try:
        return engine.kv_stats()
    except Exception:  # accounting is best effort; a failure here must not fail a step
        logger.exception("kv_stats failed")
        return None


def _step_isolating(engine: EngineProtocol, items: list[StepItem]) -> tuple[StepResult | None, dict[str, str]]:
    """One batched step; if the batch call itself raises, step each item alone to find the
    faulty session(s)."""
    try:
        return engine.step(StepPlan(tuple(items))), {}
    except Exception as exc:
        if len(items) == 1:
            return None, {items[0].session_id: _describe(exc)}
        logger.warning("batched step raised (%s); stepping %d items alone", _describe(exc), len(items))
    results: list[ItemResult] = []
    errors: dict[str, str] = {}
    for item in items:
        try:
            results.extend(engine.step(StepPlan((item,))).results)
        except Exception as exc:
            errors[item.session_id] = _describe(exc)
    return StepResult(results=tuple(results)), errors


def _finish_leftover(engine: EngineProtocol, sid: str) -> None:
    """A rollback keeps a chunk the viewer already saw when only its cache pass is left: run what
    is left of it alone before the next chunk begins."""
    for _ in range(_LEFTOVER_PHASES):
        phase = engine.next_phase(sid)
        if phase is None:
            return
        result = engine.step(StepPlan((StepItem(sid, phase),)))
        for item in result.results:
            if item.error is not None:
                raise RuntimeError(f"finishing chunk {item.chunk_index}: {item.error}")
    raise RuntimeError(f"a chunk kept after rollback did not finish in {_LEFTOVER_PHASES} phases")


def run_step(engine: EngineProtocol, entries: tuple[Entry, ...]) -> StepOutcome:
    items: list[StepItem] = []
    failed: dict[str, str] = {}
    for entry in entries:
        sid = entry.session_id
        try:
            if entry.begin is not None:
                _finish_leftover(engine, sid)
                engine.begin_chunk(sid, [entry.begin])
            phase = engine.next_phase(sid)
        except Exception as exc:
            failed[sid] = _describe(exc)
            continue
        if phase is None:
            failed[sid] = "engine reports no chunk in progress for a scheduled session"
            continue
        items.append(StepItem(sid, phase))
    step, step_errors = _step_isolating(engine, items) if items else (None, {})
    failed.update(step_errors)
    finished: set[str] = set()
    for result in step.results if step is not None else ():
        sid = result.session_id
        if result.error is not None:
            failed[sid] = result.error
            continue
        try:
            if engine.next_phase(sid) is None:
                finished.add(sid)
        except Exception as exc:
            failed[sid] = _describe(exc)
    return StepOutcome(step, failed, frozenset(finished), _safe_kv(engine))


class _RestoreFailed(Exception):
    pass


def _run_op(engine: EngineProtocol, sid: str, op: EngineOp, snapshots: dict[str, bytes]) -> None:
    if op.kind == Op.ROLLBACK:
        engine.rollback(sid)
    elif op.kind == Op.RESET:
        engine.reset(sid, seed=op.seed, prompt=op.prompt)
    elif op.kind == Op.SET_PROMPT:
        engine.set_prompt(sid, op.prompt)
    elif op.kind == Op.MARK_DELIVERED:
        engine.mark_delivered(sid, op.chunk_index)
    elif op.kind == Op.OFFLOAD:
        engine.offload(sid)
    elif op.kind == Op.RESTORE:
        if not engine.restore(sid):
            raise _RestoreFailed
    elif op.kind == Op.SNAPSHOT:
        snapshots[sid] = engine.snapshot(sid)


def run_ops(engine: EngineProtocol, ops: Mapping[str, list[EngineOp]]) -> OpsOutcome:
    errors: dict[str, str] = {}
    snapshots: dict[str, bytes] = {}
    restore_failed: list[str] = []
    for sid, session_ops in ops.items():
        for op in session_ops:
            try:
                _run_op(engine, sid, op, snapshots)
            except _RestoreFailed:
                restore_failed.append(sid)
                break
            except Exception as exc:
                errors[sid] = f"{op.kind.value}: {_describe(exc)}"
                break
    return OpsOutcome(errors, snapshots, tuple(restore_failed), _safe_kv(engine))


def _snapshot_and_close(engine: EngineProtocol, session_ids: tuple[str, ...]) -> dict[str, bytes]:
    snapshots = {}
    for sid in session_ids:
        try:
            snapshots[sid] = engine.snapshot(sid)
        except Exception:  # that session resumes from its last stored snapshot instead
            logger.exception("snapshot of session %s at shutdown failed", sid)
        try:
            engine.close_session(sid)
        except Exception:
            logger.exception("closing session %s at shutdown failed", sid)
    return snapshots
