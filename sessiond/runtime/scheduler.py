"""The step scheduler between sessions and the engine.

Each round: run the engine operations sessions queued (rollbacks after interrupts, resets for
cuts, prompt changes, delivery marks, offload/restore, snapshots) — so interrupts and closes
take effect between steps — then pick the session-chunks to advance by deadline (earliest
first, across sessions and modes; every deadline is a playback time: world = when the viewer's
buffer runs dry; director = the segment's planned start delay + n / fps), batch up to
`max_batch` of them into ONE engine step (the engine groups them by phase) where the cost model
says batching helps, and hand the decoded frames to their sessions. Deadline order is what keeps
it fair: a long director segment's later chunks have later deadlines than a world session's
next chunk or a new segment's first one.

Batching (`chunk_cost`, seconds of a chunk at batch b, from the cost model): the (b+1)-th
session-chunk joins a batch of b only when that is cheaper than running it after
(chunk(b+1) < chunk(b) + chunk(1)) and the earliest deadline in the batch is still met; a
chunk whose deadline is lost already is joined only by chunks lost as well (batching it with an
on-time one would make it later still, and its owner's next chunks late behind it: the plan of
`sessiond.admission.edf_plan` then advised a director a 10 s wait); without a cost model every
ready chunk up to `max_batch` is batched.

Idle sessions (`sessiond.runtime.idle_offload`): offloaded after `idle_offload_s` where an offload is
cheap, else only when the KV pool is short of room (an offload blocks the engine: 3.3 s on the H200)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from engine.api import KVStats, StepResult
from protocols.errors import ErrorCode
from sessiond.admission.edf_plan import joins_batch
from sessiond.runtime.engine_host import Entry, StepHost
from sessiond.runtime.engine_worker import WorkerStopped
from sessiond.runtime.idle_offload import IdleOffload
from sessiond.session.jobs import ChunkJob, EngineOp
from sessiond.session.lifecycle import SessionState
from sessiond.session.session import Session

__all__ = ["Scheduler"]

logger = logging.getLogger(__name__)

_IDLE_TICK_S = 0.5


class Scheduler:
    def __init__(self, host: StepHost, sessions: dict[str, Session], *,
                 max_batch: int, metrics: Any, idle_offload_s: float, idle_close_s: float,
                 on_snapshot: Callable[[str, bytes], None], on_close: Callable[[str, str], None],
                 order: str = "deadline", on_tick: Callable[[], None] | None = None,
                 chunk_cost: Callable[[int], float] | None = None, session_kv_bytes: int = 0,
                 offload_cost: Callable[[], float | None] | None = None) -> None:
        self.host = host
        self.sessions = sessions
        self.max_batch = max_batch
        self.metrics = metrics
        # seconds of one offload: the cost model's (offload_cost), else the last measured here
        self._offload_cost = offload_cost
        self._offload_measured: float | None = None
        self.idle_offload = IdleOffload(idle_offload_s, session_kv_bytes, self.offload_seconds)
        self.idle_close_s = idle_close_s
        self.on_snapshot = on_snapshot
        self.on_close = on_close  # (session id, reason): the app closes it
        self.order = order  # "deadline" (earliest first) or "fifo" (request-level: in order of arrival)
        self.on_tick = on_tick
        self.chunk_cost = chunk_cost
        self.step_listeners: list[Callable[[StepResult], None]] = []
        # each step's wall seconds, from the end of the step before when the scheduler went straight
        # on (so the engine ops and the event loop between steps count) to its frames handed out
        self.wall_listeners: list[Callable[[float], None]] = []
        # (offload or restore, seconds of one) measured online: a round of ops of that kind alone
        self.ops_listeners: list[Callable[[str, float], None]] = []
        self._last_end: float | None = None  # when the last step's frames were handed out; None after a wait
        self.kv: KVStats | None = None
        self.steps = 0
        self.round_errors = 0
        self._event = asyncio.Event()
        self._stopping = False
        self._last_idle_check = 0.0

    def wake(self) -> None:
        self._event.set()

    def stop(self) -> None:
        self._stopping = True
        self._event.set()

    async def run(self) -> None:
        try:
            while not self._stopping:
                try:
                    await self.run_round()
                except WorkerStopped:
                    logger.error("the engine thread stopped; the scheduler stops with it")
                    return
                except Exception:  # a bug in one round must not stop every session for good
                    self.round_errors += 1
                    logger.exception("scheduler round failed (%d so far); going on", self.round_errors)
                    await asyncio.sleep(0.1)
        finally:
            logger.info("scheduler exited")

    async def run_round(self) -> None:
        now = time.monotonic()
        if now - self._last_idle_check >= _IDLE_TICK_S:
            self._last_idle_check = now
            self._check_idle(now)
            if self.on_tick is not None:
                self.on_tick()
        await self._run_ops()
        chosen, next_at = self._pick(time.monotonic())
        self.metrics.ready_sessions.set(len(chosen))
        self.metrics.engine_queue.set(self.host.depth)
        if not chosen:
            timeout = _IDLE_TICK_S if next_at is None else max(0.0, min(_IDLE_TICK_S, next_at - time.monotonic()))
            self._event.clear()
            if any(s.ops for s in self.sessions.values()):
                return
            self._last_end = None  # the engine idles: the next step's wall time starts at its own start
            try:
                await asyncio.wait_for(self._event.wait(), timeout)
            except TimeoutError:
                pass
            return
        await self._step(chosen)

    # ---- engine ops ----------------------------------------------------------------------
    async def _run_ops(self) -> None:
        ops: dict[str, list[EngineOp]] = {}
        for session in self.sessions.values():
            if session.ops:
                ops[session.id] = session.take_ops()
        if not ops:
            return
        started = time.monotonic()
        outcome = await self.host.run_ops(ops)
        kinds = {op.kind.value for queued in ops.values() for op in queued}
        if len(kinds) == 1 and kinds <= {"offload", "restore"} and not outcome.errors:
            took = (time.monotonic() - started) / sum(len(queued) for queued in ops.values())
            kind = kinds.pop()
            if kind == "offload":
                self._offload_measured = took
            for ops_listener in self.ops_listeners:
                ops_listener(kind, took)
        self._set_kv(outcome.kv)
        for sid, why in outcome.errors.items():
            self._fault(sid, why)
        for sid in outcome.restore_failed:
            failed = self.sessions.get(sid)
            if failed is not None:
                failed.restore_failed()
        for sid, data in outcome.snapshots.items():
            self.on_snapshot(sid, data)

    # ---- choosing and stepping -----------------------------------------------------------
    def _pick(self, now: float) -> tuple[list[tuple[Session, ChunkJob, bool]], float | None]:
        # (sort key, order, session, begin, deadline, arrival)
        ready: list[tuple[float, int, Session, bool, float, float]] = []
        next_at: float | None = None
        fifo = self.order == "fifo"
        for order, session in enumerate(self.sessions.values()):
            if session.state.terminal or session.ops:
                continue  # ops that arrived during this round run first (a rollback must not
                # land on a chunk begun after it was asked for)
            job = session.job
            if job is not None:
                ready.append((job.arrival if fifo else job.deadline, order, session, False, job.deadline, job.arrival))
                continue
            want = session.demand(now)
            if want is None:
                continue
            deadline, start_by = want
            if now >= start_by:
                arrival = session.arrival(start_by)
                ready.append((arrival if fifo else deadline, order, session, True, deadline, arrival))
            elif next_at is None or start_by < next_at:
                next_at = start_by
        ready.sort(key=lambda r: (r[0], r[1]))
        chosen = []
        size = self.batch_size(now, [r[4] for r in ready], [r[2].following_deadline(r[4]) for r in ready])
        for _, _, session, begin, deadline, arrival in ready[:size]:
            job = session.begin_job(now, deadline, arrival) if begin else session.job
            assert job is not None
            chosen.append((session, job, begin))
        return chosen, next_at

    def batch_size(self, now: float, deadlines: list[float], following: list[float | None] | None = None) -> int:
        """How many of the ready chunks (in the order they are served, with these deadlines; their
        owners' next chunks due at `following`, None where an owner has none) go into this step."""
        top = min(self.max_batch, len(deadlines))
        cost = self.chunk_cost
        if cost is None or top <= 1:
            return top
        nexts = [math.inf if d is None else d for d in (following or [None] * len(deadlines))]
        single, size = cost(1), 1
        earliest = deadlines[0]
        while size < top:
            now_s, more_s = cost(size), cost(size + 1)
            if more_s >= now_s + single:
                break  # no batching gain: the next chunk is better served after
            next_by = min([*nexts[:size + 1], *deadlines[size + 1:]], default=math.inf)
            if not joins_batch(now, single, more_s, earliest, deadlines[size], now_s=now_s, next_by=next_by):
                break  # it would make the earliest deadline (or a chunk due before it) late, or join a lost one
            size += 1
        return size

    async def _step(self, chosen: list[tuple[Session, ChunkJob, bool]]) -> None:
        entries = tuple(Entry(s.id, job.action if begin else None) for s, job, begin in chosen)
        jobs = {s.id: job for s, job, _ in chosen}
        started = time.monotonic()
        outcome = await self.host.step(entries)
        self.steps += 1
        self._set_kv(outcome.kv)
        if outcome.result is not None:
            for phase, seconds in outcome.result.seconds.items():
                self.metrics.step_seconds.labels(phase=phase).observe(seconds)
            self.metrics.step_batch.observe(len(outcome.result.results))
            for listener in self.step_listeners:
                listener(outcome.result)
        else:
            self.metrics.step_seconds.labels(phase="none").observe(time.monotonic() - started)
        for item in outcome.chunks():
            session = self.sessions.get(item.session_id)
            job = jobs.get(item.session_id)
            if session is None or job is None or session.state.terminal:
                continue
            if item.chunk is not None:
                session.on_frames(job, item.chunk)
            if item.session_id in outcome.finished:
                took = session.on_job_done(job)
                if took is not None:
                    self.metrics.chunk_seconds.observe(took)
        for sid, why in outcome.failed.items():
            if sid in jobs:
                self._fault(sid, why)
        ended = time.monotonic()
        if outcome.result is not None:
            wall = ended - (started if self._last_end is None else self._last_end)
            for wall_listener in self.wall_listeners:
                wall_listener(wall)
        self._last_end = ended

    # ---- faults, idleness, accounting ----------------------------------------------------
    def _fault(self, session_id: str, why: str) -> None:
        session = self.sessions.get(session_id)
        if session is None or session.state.terminal:
            return
        logger.error("engine fault in session %s: %s", session_id, why)
        self.metrics.engine_faults.inc()
        session.fail(ErrorCode.ENGINE_FAULT, f"the engine failed on this session ({why}); it has ended")
        self.on_close(session_id, "engine_fault")

    def offload_seconds(self) -> float | None:
        """Seconds one offload takes: the cost model's prediction, else the last measured; None: unknown."""
        predicted = self._offload_cost() if self._offload_cost is not None else None
        return predicted if predicted is not None else self._offload_measured

    def _check_idle(self, now: float) -> None:
        could_offload: list[tuple[float, Session]] = []
        for session in list(self.sessions.values()):
            if session.connection is not None and session.state == SessionState.ACTIVE:
                stats = session.stats(now)
                if stats is not None:
                    session.push_control(stats)
            idle_for = now - session.idle_since
            if session.state in (SessionState.IDLE, SessionState.OFFLOADED) and idle_for >= self.idle_close_s:
                self.on_close(session.id, "idle")
            elif session.state == SessionState.IDLE and session.job is None:
                could_offload.append((idle_for, session))
        for session in self.idle_offload.choose(could_offload, self.kv):
            session.offload(idle_s=round(now - session.idle_since, 1))

    def _set_kv(self, kv: KVStats | None) -> None:
        if kv is None:
            return
        self.kv = kv
        self.metrics.kv_slabs.labels(where="in_use").set(kv.slabs_in_use)
        self.metrics.kv_slabs.labels(where="offloaded").set(kv.slabs_offloaded)
        self.metrics.kv_slabs.labels(where="free").set(kv.slabs_free)

