"""Placement: which worker gets a new session, and which one takes over a session whose worker died
or drains. Workers are ordered by predicted headroom for the session's mode (their published
capacity, debited locally for what this placer put there after the record was published); each
worker's own admission is asked in that order and the first that admits wins the binding. Only
when every worker asked refuses is the answer a refusal, with the smallest retry-after they gave.

Framework-free: the caller supplies how to ask a worker (a control call through the runtime, or a
simulated worker) and the directory (Redis, or the simulator's stand-in)."""

from __future__ import annotations

import heapq
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from fleet.directory import SessionDirectory
from fleet.errors import FencedOut, FleetError, NoWorkerAdmits, WorkerUnreachable
from fleet.messages import Binding, WorkerCapacity

__all__ = ["Admitted", "Placed", "Placement", "Refusal", "order_workers"]

DEFAULT_RETRY_S = 5.0  # the retry-after when no live worker is there to say


@dataclass(frozen=True)
class Admitted:
    """A worker admitted the session (and created or resumed it); `response` is its answer."""

    session_id: str
    response: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Refusal:
    """A worker refused (its admission said no, or it could not be reached)."""

    worker: str
    retry_after_s: float
    reason: str  # the worker's message
    code_reason: str | None = None  # the worker's error-body `reason` (protocols.http.CAPACITY_REASONS)


@dataclass(frozen=True)
class Placed:
    binding: Binding
    response: dict[str, Any]
    asked: int  # how many workers were asked before one admitted


Ask = Callable[[WorkerCapacity], Awaitable[Admitted | Refusal]]


@dataclass(frozen=True)
class _Debit:
    """What this placer predicted of a worker after asking it, stamped on the workers' clock."""

    worker: str
    mode: str
    refused: bool
    at: float


def _debited(w: WorkerCapacity, mode: str, refused: bool) -> WorkerCapacity:
    if refused:  # it said no: predict no headroom for this mode until a record published after
        return replace(w, headroom={**w.headroom, mode: 0.0})
    take = w.cost.get(mode, 0.0)
    return replace(w, headroom={m: h - take for m, h in w.headroom.items()},
                   sessions=w.sessions + 1, kv_free_sessions=w.kv_free_sessions - 1)


def order_workers(workers: list[WorkerCapacity], mode: str, exclude: frozenset[str] = frozenset(),
                  limit: int | None = None) -> list[WorkerCapacity]:
    """Non-draining workers, most predicted headroom for `mode` first; those with no KV room or no
    headroom come last (their records may be a second old); ties go to fewer sessions, then the key.
    With `limit`, only the first `limit` (a partial selection: linear in the fleet's size)."""
    live = [w for w in workers if not w.draining and w.worker not in exclude]

    def rank(w: WorkerCapacity) -> tuple[bool, float, int, str]:
        return (not w.can_take(mode), -w.headroom.get(mode, 0.0), w.sessions, w.worker)

    return heapq.nsmallest(limit, live, key=rank) if limit is not None else sorted(live, key=rank)


class Placement:
    """Places sessions over the workers the directory lists. One per gateway (or simulator); it
    keeps only a one-second view of the capacity records, so any number of placers can share a
    directory."""

    def __init__(self, directory: SessionDirectory, *, max_asks: int = 8, view_ttl_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time,
                 debit_memory_s: float = 30.0) -> None:
        if max_asks < 1:
            raise ValueError(f"max_asks must be >= 1 (ask at least one worker), got {max_asks}")
        self.directory = directory
        self.max_asks = max_asks
        self.view_ttl_s = view_ttl_s
        self.debit_memory_s = debit_memory_s
        self._clock = clock
        self._wall = wall_clock  # the clock the workers stamp `published_at` with
        self._view: dict[str, WorkerCapacity] = {}
        self._view_at = float("-inf")
        self._debits: list[_Debit] = []

    async def view(self) -> list[WorkerCapacity]:
        """The capacity records, re-read at most once per `view_ttl_s`. A re-read record keeps the
        debits this placer made after it was published: a worker publishes once a second, so a
        record read right after a placement does not count that session yet."""
        now = self._clock()
        if now - self._view_at >= self.view_ttl_s:
            self._view = {w.worker: w for w in await self.directory.workers()}
            self._view_at = now
            horizon = self._wall() - self.debit_memory_s
            self._debits = [d for d in self._debits if d.at > horizon]
            for d in self._debits:
                w = self._view.get(d.worker)
                if w is not None and d.at > w.published_at:
                    self._view[d.worker] = _debited(w, d.mode, d.refused)
        return list(self._view.values())

    def invalidate(self) -> None:
        """Re-read the capacity records on the next view."""
        self._view_at = float("-inf")

    def forget(self, worker: str) -> None:
        """Drop a worker from the view until the next records (it died, or was found unreachable)."""
        self._view.pop(worker, None)

    def _debit(self, worker: str, mode: str, refused: bool) -> None:
        self._debits.append(_Debit(worker, mode, refused, self._wall()))
        w = self._view.get(worker)
        if w is not None:
            self._view[worker] = _debited(w, mode, refused)

    async def _first_admitting(self, mode: str, ask: Ask, exclude: frozenset[str]) \
            -> tuple[WorkerCapacity, Admitted, int]:
        refusals: list[Refusal] = []
        candidates = order_workers(await self.view(), mode, exclude, limit=self.max_asks)
        for asked, worker in enumerate(candidates, start=1):
            try:
                answer = await ask(worker)
            except WorkerUnreachable as exc:
                self.forget(worker.worker)
                refusals.append(Refusal(worker.worker, DEFAULT_RETRY_S, str(exc)))
                continue
            if isinstance(answer, Refusal):
                self._debit(worker.worker, mode, refused=True)
                refusals.append(answer)
                continue
            self._debit(worker.worker, mode, refused=False)
            return worker, answer, asked
        retry = min((r.retry_after_s for r in refusals), default=DEFAULT_RETRY_S)
        shared = {r.code_reason for r in refusals}
        raise NoWorkerAdmits(retry, [f"{r.worker}: {r.reason}" for r in refusals],
                             shared.pop() if len(shared) == 1 else None)

    async def place(self, mode: str, create: Ask) -> Placed:
        """Create a new session on the first worker (by headroom) whose admission accepts it, and
        bind it there. Raises NoWorkerAdmits when every worker asked refuses."""
        worker, admitted, asked = await self._first_admitting(mode, create, frozenset())
        binding = await self.directory.bind(admitted.session_id, worker.worker, mode)
        if binding is None:
            raise FleetError(f"session id {admitted.session_id} from {worker.worker} is already bound elsewhere")
        return Placed(binding, admitted.response, asked)

    async def replace_session(self, binding: Binding, resume: Ask,
                              abandon: Callable[[WorkerCapacity, str], Awaitable[None]]) -> Placed:
        """Re-place a session whose worker died or drains: the first other worker (by headroom)
        that resumes it takes the binding at the next epoch. If another placer moved it first, the
        epoch fence refuses this move and the duplicate is abandoned on the worker that resumed it."""
        worker, admitted, asked = await self._first_admitting(binding.mode, resume, frozenset({binding.worker}))
        try:
            moved = await self.directory.rebind(binding.session_id, worker.worker, binding.epoch)
        except FencedOut as exc:
            if exc.current is None or exc.current[0] != worker.worker:  # the winner may have chosen it too
                await abandon(worker, binding.session_id)
            raise
        return Placed(moved, admitted.response, asked)
