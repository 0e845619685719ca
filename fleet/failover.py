"""Failover: a worker whose capacity record expired is dead; each session it owned is re-placed on
a live worker (which resumes it from its durable record and continuation snapshot) under the
epoch fence. Any number of gateways may sweep at once: for each session one re-placement wins the
fence and the others abandon their duplicate.

A worker that died before this monitor started (or before it first saw the worker's record) has
no record to expire: every `orphan_scan_every` sweeps, starting with the first, the monitor also
asks the directory which workers own sessions and treats those without a live record as dead."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fleet.directory import SessionDirectory
from fleet.errors import FencedOut, FleetError
from fleet.messages import WorkerCapacity
from fleet.placement import Admitted, Placement, Refusal

__all__ = ["FailoverMonitor", "SweepReport"]

Resume = Callable[[WorkerCapacity, str], Awaitable[Admitted | Refusal]]
Abandon = Callable[[WorkerCapacity, str], Awaitable[None]]


@dataclass
class SweepReport:
    dead: list[str] = field(default_factory=list)
    moved: dict[str, str] = field(default_factory=dict)  # session id -> new worker
    raced: list[str] = field(default_factory=list)  # another sweeper moved it first
    stranded: dict[str, str] = field(default_factory=dict)  # session id -> the dead worker it stays bound to


class FailoverMonitor:
    """Watches the capacity records through a placer's view and re-places the dead workers' sessions."""

    def __init__(self, directory: SessionDirectory, placement: Placement, resume: Resume, abandon: Abandon,
                 orphan_scan_every: int = 30) -> None:
        if orphan_scan_every < 1:
            raise ValueError(f"orphan_scan_every must be >= 1 sweep, got {orphan_scan_every}")
        self.directory = directory
        self.orphan_scan_every = orphan_scan_every
        self.sweeps = 0
        self.placement = placement
        self._resume = resume
        self._abandon = abandon
        self.known: set[str] = set()
        self.pending: set[str] = set()  # dead workers with sessions still bound to them

    async def sweep(self) -> SweepReport:
        """One pass: notice workers that vanished since the last pass and move what they owned."""
        self.placement.invalidate()
        live = {w.worker for w in await self.placement.view()}
        orphaned = set(await self.directory.owners()) - live if self.sweeps % self.orphan_scan_every == 0 else set()
        self.sweeps += 1
        report = SweepReport(dead=sorted((self.known - live) | (self.pending - live) | orphaned))
        self.known = live
        self.pending = set()
        for dead in report.dead:
            for sid in await self.directory.owned_by(dead):
                await self._move(sid, dead, report)
            if any(w == dead for w in report.stranded.values()):
                self.pending.add(dead)
        return report

    async def _move(self, sid: str, dead: str, report: SweepReport) -> None:
        binding = await self.directory.lookup(sid)
        if binding is None or binding.worker != dead:
            return

        async def resume(w: WorkerCapacity) -> Admitted | Refusal:
            return await self._resume(w, sid)

        try:
            placed = await self.placement.replace_session(binding, resume, self._abandon)
        except FencedOut:
            report.raced.append(sid)
        except FleetError:  # no live worker admits it now: the next sweep tries again
            report.stranded[sid] = dead
        else:
            report.moved[sid] = placed.binding.worker
