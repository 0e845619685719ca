"""Functions that run ON the engine thread: one step of a batch, and a session's queued ops.

Faults are isolated per session: an exception from one session's call becomes that session's
error string and never touches the others."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.api import EngineProtocol, FrameAction, ItemResult, KVStats, StepItem, StepPlan, StepResult
from sessiond.session.state import EngineOp, Op

__all__ = ["Entry", "OpsOutcome", "Outcome", "StepOutcome", "run_ops", "run_step"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Entry:
    session_id: str
    begin: tuple[FrameAction, ...] | None  # begin a new chunk with this conditioning first


@dataclass(frozen=True)
class Outcome:
    session_id: str
    chunk_index: int
    result: ItemResult | None
    error: str | None
    done: bool  # the chunk needs no further phase


@dataclass(frozen=True)
class StepOutcome:
    outcomes: tuple[Outcome, ...]
    step: StepResult | None
    kv: KVStats | None


@dataclass(frozen=True)
class OpsOutcome:
    errors: dict[str, str]  # session id -> what failed
    snapshots: dict[str, bytes]
    restore_failed: tuple[str, ...]
    kv: KVStats | None


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
    for _ in range(16):
        phase = engine.next_phase(sid)
        if phase is None:
            return
        result = engine.step(StepPlan((StepItem(sid, phase),)))
        for item in result.results:
            if item.error is not None:
                raise RuntimeError(f"finishing chunk {item.chunk_index}: {item.error}")
    raise RuntimeError("a chunk kept after rollback did not finish in 16 phases")


def run_step(engine: EngineProtocol, entries: tuple[Entry, ...]) -> StepOutcome:
    items: list[StepItem] = []
    errors: dict[str, str] = {}
    chunk: dict[str, int] = {}
    for entry in entries:
        sid = entry.session_id
        try:
            if entry.begin is not None:
                _finish_leftover(engine, sid)
                chunk[sid] = engine.begin_chunk(sid, list(entry.begin))
            phase = engine.next_phase(sid)
        except Exception as exc:
            errors[sid] = _describe(exc)
            continue
        if phase is None:
            errors[sid] = "engine reports no chunk in progress for a scheduled session"
            continue
        items.append(StepItem(sid, phase))
    step, step_errors = _step_isolating(engine, items) if items else (None, {})
    errors.update(step_errors)
    outcomes: list[Outcome] = []
    for result in step.results if step is not None else ():
        sid = result.session_id
        if result.error is not None:
            errors[sid] = result.error
            continue
        try:
            done = engine.next_phase(sid) is None
        except Exception as exc:
            errors[sid] = _describe(exc)
            continue
        outcomes.append(Outcome(sid, result.chunk_index, result, None, done))
    outcomes.extend(Outcome(sid, chunk.get(sid, -1), None, why, True) for sid, why in errors.items())
    return StepOutcome(tuple(outcomes), step, _safe_kv(engine))


def _run_op(engine: EngineProtocol, sid: str, op: EngineOp, out: OpsOutcome) -> None:
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
        out.snapshots[sid] = engine.snapshot(sid)


class _RestoreFailed(Exception):
    pass


def run_ops(engine: EngineProtocol, ops: dict[str, list[EngineOp]]) -> OpsOutcome:
    out = OpsOutcome(errors={}, snapshots={}, restore_failed=(), kv=None)
    restore_failed: list[str] = []
    for sid, session_ops in ops.items():
        for op in session_ops:
            try:
                _run_op(engine, sid, op, out)
            except _RestoreFailed:
                restore_failed.append(sid)
                break
            except Exception as exc:
                out.errors[sid] = f"{op.kind.value}: {_describe(exc)}"
                break
    return OpsOutcome(out.errors, out.snapshots, tuple(restore_failed), _safe_kv(engine))
