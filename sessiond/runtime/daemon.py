"""`Daemon`: the runtime the app's routes call. Owns the engine host, the scheduler, the
sessions, the store writer and the admission policy; starts them in `start()` and cancels and
awaits them in `stop()`."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from engine.api import EngineProtocol, KVStats, ModelInfo
from protocols.errors import ErrorCode, ProtocolError, Refused
from sessiond.admission.audience import SpectatorAdmission, SpectatorBudget
from sessiond.admission.build import build_admission, objectives_of
from sessiond.admission.costmodel import CostModel
from sessiond.admission.decision import AdmissionPolicy, AdmissionRequest, Decision
from sessiond.admission.errors import CostModelError
from sessiond.admission.metrics import AdmissionMetrics
from sessiond.admission.policy import PolicyBase
from sessiond.admission.runtime import AdmissionRuntime
from sessiond.admission.summary import summarize
from sessiond.api_keys import ApiKeys
from sessiond.config import ServeConfig
from sessiond.errors import StoreUnavailable
from sessiond.logs import log_event
from sessiond.metrics import Metrics
from sessiond.runtime.abandoned import RECLAIMING_REASONS, abandoned
from sessiond.runtime.engine_factory import picture_check
from sessiond.runtime.engine_host import EngineHost
from sessiond.runtime.replicas import ReplicaHost
from sessiond.runtime.scheduler import Scheduler
from sessiond.runtime.start_plan import PlanInputs, plan_segment_start
from sessiond.runtime.strategy import Strategy, StrategyError, check_machine, load_strategy, replica_plans
from sessiond.runtime.unconnected import ConnectWatch
from sessiond.session import Session, SessionEnv
from sessiond.session.lifecycle import SessionState
from sessiond.session.overruns import apply_overruns
from sessiond.store import Store, open_store
from sessiond.store.base import SessionRecord
from sessiond.store.persistence import StoreWriter
from sessiond.store.positions import PositionLedger
from sessiond.store.recording import write_recording
from sessiond.store.sweep import sweep_stale
from transports.inbound import InboundLimits
from transports.warm import warm_media_stack

__all__ = ["Daemon"]

logger = logging.getLogger(__name__)

_FAILED_KEEP_S = 60.0
# the longest start delay a director is planned (and advised) to wait: past it, the newest segment
# comes after every chunk the others owe in any case
_PLAN_MAX_DELAY_S = 60.0


async def _settled(task: asyncio.Future[Any]) -> None:
    """Await a task being stopped; its cancellation is expected, any other failure is logged."""
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception:
        logger.exception("task %r failed while stopping", task)


class Daemon:
    def __init__(self, config: ServeConfig, *, engine: EngineProtocol | None = None, store: Store | None = None,
                 admission: AdmissionPolicy | None = None) -> None:
        self.config = config
        self.metrics = Metrics()
        self.store = store if store is not None else open_store(config.redis_url)
        self.sessions: dict[str, Session] = {}
        self.strategy = load_strategy(config.strategy) if config.strategy else Strategy.default()
        self.host = self._host(engine)
        self.model_name = config.model
        self.fallback: str | None = None
        self.admission: AdmissionRuntime | None = None
        if admission is not None:  # a cost-model policy handed in runs like a built one (scheduling, feed, plans)
            measured = admission if isinstance(admission, PolicyBase) else None
            metrics = AdmissionMetrics(self.metrics.registry) if measured is not None else None
            self.admission = AdmissionRuntime(admission, measured=measured, metrics=metrics)
        self.api_keys = ApiKeys.load(config.api_keys) if config.api_keys else None  # None: no key needed
        self.positions = PositionLedger(self.store, self.metrics)
        self.writer = StoreWriter(self.store, self.metrics, self._live_record, positions=self.positions)
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sessiond-pack")
        # spectators' shared packing (one pack per session and media mode) never queues ahead of an owner's
        self.spectator_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessiond-spectators")
        self.scheduler: Scheduler | None = None
        self._online_cost: CostModel | None = None  # without a cost-model policy: steps measured online
        self.ready = False
        self.started_at = time.time()
        self.warm_error: str | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._scheduler_task: asyncio.Task[None] | None = None
        self._warm_task: asyncio.Task[None] | None = None
        self._resume_locks: dict[str, asyncio.Lock] = {}
        self._gateway: Any = None
        # fleet: a draining daemon admits nothing; sessions handed to another daemon wait in
        # `handed_off` (connection open, nothing generated) until their viewer is told where to go;
        # `owns(sid)` says whether a session found only in the shared store may be resumed here
        self.draining = False
        self.handed_off: dict[str, Session] = {}
        self.owns: Callable[[str], Awaitable[bool]] | None = None
        self.unconnected = ConnectWatch(config.unconnected_close_s)
        self.spectators = SpectatorAdmission(SpectatorBudget(  # spectators' CPU bound, connect rate
            config.spectator_cpu_cores, config.spectator_cpu_each, config.spectator_connects_per_s,
            each_floor=config.spectator_cpu_each_floor))

    def _host(self, engine: EngineProtocol | None) -> EngineHost | ReplicaHost:
        """The engine host the strategy asks for: one engine (the default), or replicas. Checked
        against the machine here too, so a daemon built without `serve` refuses the same way."""
        if self.config.strategy is None:
            return EngineHost(engine)
        if engine is not None:
            raise StrategyError("strategy", "a strategy places the engines the daemon builds; it cannot apply to "
                                "an engine handed in")
        from sessiond.runtime.engine_factory import machine_facts

        facts = machine_facts(self.config, self.strategy)
        check_machine(self.strategy, facts)
        plans = replica_plans(self.strategy, facts, self.config.kv_budget_bytes)
        if len(plans) == 1:
            return EngineHost(plan=plans[0])
        return ReplicaHost(plans)

    # ---- start / stop ------------------------------------------------------------------------
    async def start(self) -> None:
        self.started_at = time.time()
        self.host.start()
        self.writer.start()
        self._warm_task = asyncio.create_task(self._warm(), name="sessiond-warmup")

    async def _warm(self) -> None:
        started = time.monotonic()
        try:
            built = await self.host.load(self.config)
            if built is not None:
                self.model_name, self.fallback = built.model, built.fallback
            else:
                self.model_name = self.host.info.name
            await self.host.warmup()
        except Exception as exc:  # reported by /readyz; the daemon stays up to say so
            self.warm_error = f"{type(exc).__name__}: {exc}"
            logger.exception("engine failed to start")
            return
        if self.admission is None:
            try:
                self.admission = await build_admission(self.config, self.host, self.metrics.registry, self._kv)
            except Exception as exc:  # reported by /readyz like any start-up failure
                self.warm_error = f"admission policy {self.config.policy!r}: {type(exc).__name__}: {exc}"
                logger.exception("admission policy failed to start")
                return
        self.scheduler = Scheduler(
            self.host, self.sessions, max_batch=self.config.max_batch, metrics=self.metrics,
            idle_offload_s=self.config.idle_offload_s, idle_close_s=self.config.idle_close_s,
            on_snapshot=self.writer.snapshot, on_close=self._close_soon, order=self.admission.scheduling,
            on_tick=self._tick, chunk_cost=self._chunk_cost(), session_kv_bytes=self.host.info.kv_bytes_per_session,
            offload_cost=self._offload_cost())
        self.scheduler.step_listeners.append(self.admission.observe_step)
        self.scheduler.wall_listeners.append(self.admission.observe_wall)
        self.scheduler.ops_listeners.append(self.admission.observe_op)
        if self.admission.measured is None:  # a policy without a cost model (kv): the start plan's
            # from the steps measured online (no profile: no plan until every phase was measured once)
            self._online_cost = CostModel(self.host.info, context_chunks=self.host.context_chunks())
            self.scheduler.step_listeners.append(self._online_cost.observe_step)
        self.scheduler.kv = await self.host.kv_stats()
        info = self.host.info  # the first viewer must not import the media stack on the event loop
        warmth = await asyncio.to_thread(warm_media_stack, info.width, info.height, info.fps)
        logger.info("media stack ready: %s", warmth.describe())
        self._scheduler_task = asyncio.create_task(self.scheduler.run(), name="sessiond-scheduler")
        self.ready = True
        self._spawn(sweep_stale(self.store, self.sessions, self.config.idle_close_s), "sessiond-sweep-stale")
        logger.info("engine ready: model %s on %s in %.1f s (attention %s%s)", self.model_name, info.device,
                    time.monotonic() - started, info.attention or "not reported",
                    ", chosen by measurement: " + ", ".join(f"{n} {ms:g} ms" for n, ms in info.attention_timings_ms)
                    if info.attention_timings_ms else "")
        summary = summarize(self.admission.policy, time.monotonic(), self.cpu_share())
        if summary is not None:
            logger.info("%s", summary.statement)

    async def stop(self) -> None:
        """Cancel and await every task, snapshot live sessions, flush the store, stop the engine thread."""
        if self._warm_task is not None and not self._warm_task.done():
            self._warm_task.cancel()
            await _settled(self._warm_task)
        self.ready = False
        if self.scheduler is not None and self._scheduler_task is not None:
            self.scheduler.stop()
            await _settled(self._scheduler_task)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            await _settled(task)
        for session in [*self.sessions.values(), *self.handed_off.values()]:
            session.hang_up()
        if self._gateway is not None:
            await _settled(asyncio.ensure_future(self._gateway.shutdown()))
        await self._release_engine_sessions()
        await self._settle_positions()
        await self.writer.stop()
        if self.config.record:
            await write_recording(self.store, self.started_at, self.config.record)
        await self.host.stop()
        try:
            await self.store.close()
        except StoreUnavailable as exc:
            logger.warning("closing the store: %s", exc)
        self.executor.shutdown(wait=False)
        self.spectator_executor.shutdown(wait=False)

    async def _release_engine_sessions(self) -> None:
        """Snapshot every live session into the store (a restarted daemon resumes from them) and
        free its engine state."""
        live = [s.id for s in self.sessions.values() if not s.state.terminal]
        if not self.host.loaded or not live:
            return
        for sid, data in (await self.host.snapshot_and_close(live)).items():
            self.writer.snapshot(sid, data)
        for sid in live:
            self.writer.persist(sid)

    async def _settle_positions(self) -> None:
        """The exact timeline position of every live session (frames sent, not merely handed out),
        so a clean restart resumes exactly where the viewer is."""
        for session in list(self.sessions.values()):
            if session.state.terminal:
                continue
            try:
                await self.positions.settle(session.id, session.out.sent)
            except StoreUnavailable as exc:
                self.metrics.store_errors.inc()
                logger.warning("session %s: its exact position could not be stored: %s", session.id, exc)
                return

    # ---- helpers -----------------------------------------------------------------------------
    def cpu_share(self) -> tuple[int, int] | None:
        """(the engine's torch threads, the machine's cores) for an engine on the CPU, else None."""
        if not self.host.loaded or self.host.info.device != "cpu":
            return None
        threads = self.config.engine_threads("cpu")
        return None if threads is None else (threads, os.cpu_count() or 1)

    @property
    def info(self) -> ModelInfo:
        if not self.host.loaded:
            raise Refused(ErrorCode.CAPACITY, "the engine is still starting; retry shortly", 1.0, "not_ready")
        return self.host.info

    def _kv(self) -> KVStats | None:
        return self.scheduler.kv if self.scheduler is not None else None

    def _live_record(self, session_id: str) -> SessionRecord | None:
        session = self.sessions.get(session_id)
        return session.record if session is not None else None

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _wake(self) -> None:
        if self.scheduler is not None:
            self.scheduler.wake()

    @property
    def lead_chunks(self) -> float:
        """World lead in chunks: --lead-chunks when given, else what the served model advises."""
        return self.config.lead_chunks if self.config.lead_chunks is not None else self.info.lead_chunks

    def new_env(self) -> SessionEnv:
        info = self.info
        c = self.config
        return SessionEnv(
            frames_per_chunk=info.frames_per_chunk, lead_chunks=self.lead_chunks, outbox_chunks=c.outbox_chunks,
            window_frames=c.window_frames(info.fps), max_actions_per_s=c.max_actions_per_s,
            max_pending_messages=c.max_pending_messages, default_segment_s=c.default_segment_s,
            director_ttff_s=c.director_ttff_s, director_lead_s=c.director_lead_s, action_space=info.action_space,
            wake=self._wake, record_event=self.writer.log, persist=self.writer.persist, reserve=self.positions.reserve,
            metrics=self.metrics, plan_start=self._plan_start, check_picture=self._picture_checker(),
            adaptive_lead=not c.fixed_lead, open_sessions=lambda: len(self.sessions),
            lead_in_frames=info.lead_in_frames)

    def _picture_checker(self) -> Callable[[Any], Awaitable[Any]] | None:
        """The served model's frame check run in the pack executor, or None (sessiond.session.picture)."""
        check = picture_check(self.model_name) if self.config.picture_check else None
        if check is None:
            return None

        async def run(frame: Any) -> Any:
            return await asyncio.get_running_loop().run_in_executor(self.executor, check, frame)

        return run

    def _plan_start(self, session_id: str, segment_s: float, lead_in_s: float) -> float | None:
        """A new segment's start delay from the scheduler's plan for every open session
        (`start_plan`, docs/admission.md "The plan"): the earliest start at which it and every
        admitted session keep their deadlines, on the start-up profile's step times stretched to
        the load budget; for a policy without a cost model (kv), on the steps measured so far, at
        face value; None before there is either."""
        measured = self.admission.measured if self.admission is not None else None
        if measured is not None:
            cost, budget, profile, jitter = measured.cost, measured.load_budget, True, measured.jitter_s
        elif self._online_cost is not None:
            cost, budget, profile = self._online_cost, 1.0 - self.config.admission_margin, False
            jitter = objectives_of(self.config).playout_ms / 1000.0
        else:
            return None
        if not cost.calibrated():
            return None
        info = self.info
        inputs = PlanInputs(step_s=lambda b: cost.planned_step_s(b, budget, profile=profile),
                            max_batch=self.config.max_batch, frames_per_chunk=info.frames_per_chunk, fps=info.fps,
                            lead_in_frames=info.lead_in_frames,
                            director_lead_s=self.config.director_lead_s, jitter_s=jitter,
                            max_delay_s=_PLAN_MAX_DELAY_S)
        return plan_segment_start(self.sessions, session_id, time.monotonic(), segment_s, lead_in_s, inputs)

    def _chunk_cost(self) -> Callable[[int], float] | None:
        """Seconds of one chunk at batch b by the cost model (steady context), for the scheduler's
        batching; None for a policy without a model."""
        measured = self.admission.measured if self.admission is not None else None
        if measured is None:
            return None
        cost = measured.cost
        replicas = self.strategy.engine.replicas  # a step of b spreads over the replicas, which run at once
        return lambda b: (cost.predict_chunk(-(-b // replicas), cost.steady_context()) if cost.calibrated()
                          else 0.0)

    def _offload_cost(self) -> Callable[[], float | None] | None:
        """Seconds of one offload by the cost model (None until measured); None for a policy without a model."""
        measured = self.admission.measured if self.admission is not None else None
        if measured is None:
            return None
        cost = measured.cost

        def seconds() -> float | None:
            try:
                return cost.predict("offload")
            except CostModelError:  # not measured yet
                return None
        return seconds

    def strategy_report(self) -> dict[str, Any]:
        """For /v1/capacity: the strategy's name, file and per-stage placement, each replica's
        sessions, and whether admission's cost model was profiled with it in place."""
        report = self.strategy.describe(self.host.info.device)
        decoder = getattr(self.host, "hosts", [self.host])[0]
        report["decoder"] = decoder.placement_words()
        if isinstance(self.host, ReplicaHost):
            report["engine"]["sessions_per_replica"] = self.host.sessions_per_replica()
        measured = self.admission.measured if self.admission is not None else None
        report["cost_model_profiled_with_it"] = measured is not None
        return report

    def check_ready(self) -> None:
        if self.draining:
            raise Refused(ErrorCode.CAPACITY, "this server is draining; create the session through the gateway "
                          "(it places it on another server)", 1.0, "draining")
        if not self.ready or not self.host.loaded or self.admission is None:
            why = self.warm_error or "the engine is warming up"
            raise Refused(ErrorCode.CAPACITY, f"not ready: {why}; retry shortly", 1.0, "not_ready")

    async def admit(self, session_id: str, mode: str, kind: str) -> None:
        """Admit or raise Refused (503 capacity, Retry-After). A policy with a wait list (one-per-gpu)
        keeps the request open up to `admission_wait_s` for a slot before refusing it."""
        assert self.admission is not None
        policy = self.admission.policy
        request = AdmissionRequest(session_id, mode, kind, time.monotonic())
        decision = policy.decide(request)
        if not decision.admitted and decision.reason in RECLAIMING_REASONS:
            decision = await self._reclaim_for(request, decision)
        if not decision.admitted and decision.reason == "queued":
            log_event("waiting", session_id, mode=mode, place=decision.queue_position)
            if await policy.wait(request, self.config.admission_wait_s):
                self.metrics.admission.labels(kind=kind, decision="admit", reason="waited").inc()
                return
        self.metrics.admission.labels(kind=kind, decision="admit" if decision.admitted else "refuse",
                                      reason=decision.reason).inc()
        if not decision.admitted:
            log_event("refused", session_id, mode=mode, kind=kind, reason=decision.reason,
                      load=round(decision.predicted_load, 3), budget=round(decision.load_budget, 3),
                      retry_after_s=decision.retry_after_s, detail=repr(decision.detail))
            raise Refused(ErrorCode.CAPACITY, decision.detail or f"over capacity ({decision.reason})",
                          decision.retry_after_s, decision.reason)

    async def _reclaim_for(self, request: AdmissionRequest, refused: Decision) -> Decision:
        """Close sessions idle `reclaim_after_s` with nobody attached (`sessiond.runtime.abandoned`),
        longest idle first, until `request` is admitted or none is left; the last decision."""
        assert self.admission is not None
        decision = refused
        for session in abandoned(self.sessions, time.monotonic(), self.config.reclaim_after_s,
                                 exclude=request.session_id):
            log_event("reclaimed", session.id, mode=session.mode, idle_s=round(time.monotonic() - session.idle_since, 1),
                      for_session=request.session_id, refused_for=decision.reason)
            self.metrics.reclaimed.inc()
            session.close()
            await self.finish_close(session.id, "abandoned")
            decision = self.admission.policy.decide(dataclasses.replace(request, now=time.monotonic()))
            if decision.admitted:
                break
        return decision

    def resume_lock(self, session_id: str) -> asyncio.Lock:
        """The lock that lets one resume of the session run at a time (dropped on close)."""
        return self._resume_locks.setdefault(session_id, asyncio.Lock())

    def release(self, session_id: str) -> None:
        if self.api_keys is not None:
            self.api_keys.release(session_id)
        if self.admission is not None:
            self.admission.policy.release(session_id, time.monotonic())

    # ---- closing -----------------------------------------------------------------------------
    def _close_soon(self, session_id: str, reason: str) -> None:
        session = self.sessions.get(session_id)
        if session is None:
            return
        if reason != "engine_fault":
            session.close()
        self._spawn(self.finish_close(session_id, reason), f"close-{session_id}")

    async def finish_close(self, session_id: str, reason: str) -> None:
        """Free the session's engine state; forget it (a failed one is kept a while for status). The
        log's `close` is at the time the close was asked: the engine frees the state between two
        steps, which on a busy engine is a chunk later, and a recorded trace replays the ask."""
        asked = time.time()
        session = self.sessions.get(session_id)
        if session is None:
            return
        self.release(session_id)
        if self.host.loaded:
            try:
                await self.host.close(session_id)
            except Exception:  # the session is gone either way; the engine's accounting is reported
                logger.exception("engine close_session(%s) failed", session_id)
        if self._gateway is not None:
            try:
                await self._gateway.close_session(session_id)
            except Exception:  # the peer dies with its session either way
                logger.exception("closing the WebRTC peer of %s failed", session_id)
        log_event("closed" if reason != "engine_fault" else "ended", session_id, reason=reason)
        if session.state == SessionState.FAILED and reason == "engine_fault":
            self.writer.persist(session_id)
            await asyncio.sleep(_FAILED_KEEP_S)  # status still says `failed` for a while
            if self.sessions.get(session_id) is not session:
                return
        self.writer.log(session_id, "close", {"reason": reason}, at=asked)
        self.sessions.pop(session_id, None)
        self._resume_locks.pop(session_id, None)
        await self.positions.close(session_id)  # a position write in flight lands before the delete
        try:
            await self.store.delete_session(session_id)
        except StoreUnavailable:
            self.metrics.store_errors.inc()
            logger.warning("session %s closed but its record could not be deleted (store unavailable)", session_id)

    def _tick(self) -> None:
        """Twice a second: admission's gauges, and its answer to sessions over their prior; created
        sessions no client connected within `unconnected_close_s` are released."""
        if self.admission is not None:
            cheap = self.scheduler is None or self.scheduler.idle_offload.cheap()
            apply_overruns(self.sessions, self.admission.refresh(self.sessions), offload=cheap)
        for sid in self.unconnected.expired(self.sessions):
            self.metrics.unconnected_closed.inc()
            self._close_soon(sid, "unconnected")

    def state_counts(self) -> dict[str, int]:
        counts = {state.label: 0 for state in SessionState}
        for session in self.sessions.values():
            counts[session.state.label] += 1
        return counts

    def webrtc_gateway(self) -> Any:
        """The WebRTC gateway, built on first use (aiortc is imported only then)."""
        if self._gateway is None:
            try:
                from transports.webrtc import WebRTCConfig, WebRTCGateway
            except ImportError as exc:
                raise ProtocolError(ErrorCode.INTERNAL, f"WebRTC is not available in this build ({exc})") from exc
            c = self.config
            self._gateway = WebRTCGateway(WebRTCConfig(
                host_addresses=tuple(c.webrtc_hosts) or None, viewer_silence_s=c.viewer_silence_s,
                inbound=self.inbound_limits()), on_error=self.count_protocol_error)
        return self._gateway

    def inbound_limits(self) -> InboundLimits:
        """What every transport's inbound reader applies to a client's messages."""
        c = self.config
        return InboundLimits(c.max_requests_per_s, c.abuse_errors_per_10s, max_message_bytes=c.max_message_bytes,
                             max_prompt_chars=c.max_prompt_chars)

    def count_protocol_error(self, code: str) -> None:
        self.metrics.protocol_errors.labels(code=code).inc()

    def update_gauges(self) -> None:
        if self.admission is not None:
            self.admission.update_gauges(time.monotonic())
        counts = dict.fromkeys(SessionState, 0)
        frames = 0
        for session in self.sessions.values():
            counts[session.state] += 1
            frames += session.out.media_frames
        for state, n in counts.items():
            self.metrics.sessions.labels(state=state.label).set(n)
        self.metrics.outbox_frames.set(frames)
        self.metrics.engine_queue.set(self.host.depth)
