"""The start-up profile: a short run through the Engine API that fills the cost model."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from engine.api import FrameAction, ModelInfo, Phase, StepItem, SteppingEngine, StepPlan
from sessiond.admission.costmodel import CostModel
from sessiond.admission.errors import CostModelError

__all__ = ["ProfileEngine", "Progress", "calibrate"]

logger = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]  # (done, total, what)

_PROMPT = "calibration profile"


class ProfileEngine(SteppingEngine, Protocol):
    """The part of engine.api.EngineProtocol the profile drives."""

    info: ModelInfo

    def offload(self, session_id: str) -> None: ...
    def restore(self, session_id: str) -> bool: ...


def _run_chunk(engine: ProfileEngine, group: Sequence[str], model: CostModel | None, cpu_time: bool = False) -> None:
    """One chunk for every session of `group`, each step asking every session for its own next
    phase (a stream's first chunk may need two decodes where a later one needs one), recording
    for each phase and batch the mean of the chunk's steps when `model` is given. With `cpu_time`, a step's seconds are the CPU time
    this thread spent in it (shared between its phases as their wall seconds are), not wall time."""
    for sid in group:
        engine.begin_chunk(sid, [FrameAction()])
    steps: dict[tuple[str, int, int], list[float]] = {}  # (phase, batch, context) -> this chunk's steps
    while True:
        items = tuple(StepItem(sid, phase) for sid in group if (phase := engine.next_phase(sid)) is not None)
        if not items:
            # one sample per phase and chunk, the mean of its steps: a chunk's denoise steps differ
            # (the demo model's first is guided: 85 ms against 45 on the 2-core box), and a
            # quartile of single steps would plan every step at the cheap ones' cost
            if model is not None:
                for (phase_name, batch, context), seconds in steps.items():
                    model.record(phase_name, batch, context, sum(seconds) / len(seconds))
            return
        cpu_began = time.thread_time()
        result = engine.step(StepPlan(items))
        cpu = time.thread_time() - cpu_began
        failed = [r for r in result.results if r.error is not None]
        if failed:
            raise CostModelError("uncalibrated", f"profile step {failed[0].phase.value} failed: {failed[0].error}")
        if model is None:
            continue
        wall = sum(result.seconds.values())
        if wall > 0:
            model.note_contention(wall / max(cpu, 1e-9))
        # every phase the step reports: a decoder placed apart runs its chunk's cache pass in the
        # decode's step (engine.placement), so a step may report a phase no item asked for
        for phase in {Phase(name) for name in result.seconds} | {item.phase for item in items}:
            took = result.seconds.get(phase.value)
            if took is not None:
                if cpu_time and wall > 0:
                    took = cpu * took / wall
                context = max((r.chunk_index for r in result.results if r.phase is phase),
                              default=max(r.chunk_index for r in result.results))
                batch = result.batch_sizes.get(phase.value, len(items))
                steps.setdefault((phase.value, batch, context), []).append(took)


def calibrate(engine: ProfileEngine, *, batches: Sequence[int] = (1, 2, 4), chunks: int = 4, rounds: int = 2,
              progress: Progress | None = None, model: CostModel | None = None,
              time_budget_s: float | None = None, context_chunks: int | None = None,
              steady_chunks: int = 0, cpu_time: bool = False,
              enough: Callable[[int, CostModel], bool] | None = None) -> CostModel:
    """At each batch size: one unrecorded warm-up chunk, then `rounds` times `chunks` chunks from an
    empty context (contexts 0..chunks-1), plus `steady_chunks` / batch (rounded up) more at the
    full context, so the steady bucket admission plans with holds enough samples at every batch for
    its lower quartile to repeat from start to start; a sample is a phase's mean step in one chunk,
    and each bucket keeps the lower quartile of its samples. Then an offload and restore twice, the
    second recorded: the first pays one-time costs a serving daemon pays once (on CUDA, pinning a
    host buffer of the session's KV size, which the caching host allocator then reuses; the H200's
    profiles recorded single offloads of 2.9-3.3 s against restores of 0.12 s). Reports progress as it goes. A new model files contexts
    past `context_chunks` (the attention window) under it. With `time_budget_s`, each batch size
    gets an equal share of it: once a batch size has used its share, its remaining chunks and rounds
    are skipped (at least one recorded chunk each), so a slow engine still finishes in bounded time.
    With `cpu_time` (a CPU engine computing on this thread alone: one torch thread), each sample is
    the CPU time the step took: what this machine's core needs, whatever else runs beside it, so
    every start of the same box gets the same profile; how much other load slowed the profile's
    wall time is kept (`CostModel.contention`). `enough(batch, model)`, asked after each batch size,
    may end the profile there (the larger batch sizes are not profiled; offload and restore are)."""
    if not batches or min(batches) < 1 or chunks < 1 or rounds < 1:
        raise CostModelError("invalid_sample", f"batches, chunks and rounds must be >= 1, got {batches}, "
                             f"{chunks}, {rounds}")
    if steady_chunks < 0:
        raise CostModelError("invalid_sample", f"steady_chunks must be >= 0, got {steady_chunks}")
    if time_budget_s is not None and time_budget_s <= 0:
        raise CostModelError("invalid_sample", f"time_budget_s must be > 0, got {time_budget_s}")
    share = None if time_budget_s is None else time_budget_s / len(set(batches))
    model = model or CostModel(engine.info, context_chunks=context_chunks)
    model.profile_clock = "cpu" if cpu_time else "wall"
    sids = [f"calibrate-{i}" for i in range(max(batches))]
    per_batch = {b: rounds * chunks + math.ceil(steady_chunks / b) for b in set(batches)}
    total = sum(per_batch.values()) + len(per_batch) + 1
    done = 0

    def tick(what: str) -> None:
        nonlocal done
        done += 1
        logger.info("cost model profile %d/%d: %s", done, total, what)
        if progress is not None:
            progress(done, total, what)

    opened: list[str] = []
    try:
        for i, sid in enumerate(sids):
            if not engine.open_session(sid, seed=i, prompt=_PROMPT):
                raise CostModelError("uncalibrated", f"the KV pool cannot hold {len(sids)} profile sessions; "
                                     f"lower the largest calibration batch ({max(batches)})")
            opened.append(sid)
        for batch in sorted(set(batches)):
            group = sids[:batch]
            began = time.perf_counter()
            for i, sid in enumerate(group):  # the group starts in lock-step: every stream fresh
                engine.reset(sid, seed=i, prompt=_PROMPT)
            _run_chunk(engine, group, None)
            tick(f"batch {batch} warm-up")
            for r in range(rounds):
                if r > 0 and share is not None and time.perf_counter() - began > share:
                    break
                for i, sid in enumerate(group):
                    engine.reset(sid, seed=i, prompt=_PROMPT)
                extra = math.ceil(steady_chunks / batch) if r == rounds - 1 else 0
                for c in range(chunks + extra):
                    _run_chunk(engine, group, model, cpu_time)
                    tick(f"batch {batch} round {r} chunk {c}")
                    if share is not None and time.perf_counter() - began > share:
                        logger.info("cost model profile: batch %d used its %.1f s share after %d chunk(s) of "
                                    "round %d", batch, share, c + 1, r)
                        break
            if enough is not None and enough(batch, model):
                larger = sorted(b for b in set(batches) if b > batch)
                if larger:
                    logger.info("cost model profile: enough after batch %d; batches %s not profiled", batch, larger)
                    done += sum(per_batch[b] + 1 for b in larger)
                break
        for warm in (False, True):  # the first round pays one-time costs: recorded is the second
            start = time.perf_counter()
            engine.offload(sids[0])
            offload_s = time.perf_counter() - start
            start = time.perf_counter()
            if not engine.restore(sids[0]):
                raise CostModelError("uncalibrated", "restore of a profile session failed: the KV pool is full")
            restore_s = time.perf_counter() - start
            if warm:
                model.record("offload", 1, 0, offload_s)
                model.record("restore", 1, 0, restore_s)
            else:
                logger.info("cost model profile: first offload %.3f s, restore %.3f s (not recorded)",
                            offload_s, restore_s)
        tick("offload and restore")
    finally:
        for sid in opened:
            engine.close_session(sid)
    return model
