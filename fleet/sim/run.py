"""The simulation: simulated workers in racks, gateways each with the REAL Placement and
FailoverMonitor over one in-memory directory, simulated time in one-second ticks. Sessions arrive
over a ramp; then one worker dies, later a whole rack; the report says what placement cost, how
busy the directory was, how even the load ended up and how long failed-over sessions were out."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from fleet.errors import NoWorkerAdmits, WorkerUnreachable
from fleet.failover import FailoverMonitor
from fleet.messages import WorkerCapacity
from fleet.placement import Admitted, Placement, Refusal
from fleet.sim.memdir import MemoryDirectory
from fleet.sim.model import CostModel, SimSession, SimWorker, draw_sessions

__all__ = ["SimConfig", "SimResult", "simulate"]


@dataclass(frozen=True)
class SimConfig:
    workers: int = 1000
    sessions: int = 20000
    gpus_per_host: int = 8
    hosts_per_rack: int = 5
    gateways: int = 4
    arrival_s: int = 300
    after_s: int = 150  # simulated seconds after the ramp: the failures happen in here
    worker_failure_after_s: int = 20  # one worker dies this long after the ramp ...
    rack_failure_after_s: int = 70  # ... and a whole rack this long after it
    world_share: float = 0.5
    ttl_s: float = 3.0  # capacity record TTL: how long a dead worker goes unnoticed at most
    resume_s: float = 2.0  # restore a session on its new worker (snapshot load + KV recompute)
    objective_s: float = 15.0  # failover target: streaming again within this
    max_asks: int = 8
    rtt_ask_s: float = 0.002  # one control call to a worker (modelled)
    rtt_op_s: float = 0.0003  # one directory command (modelled)
    seed: int = 0
    cost: CostModel = field(default_factory=CostModel)

    def __post_init__(self) -> None:
        if self.workers < 2 or self.sessions < 1 or self.gateways < 1:
            raise ValueError("a simulation needs >= 2 workers, >= 1 session and >= 1 gateway")
        if self.workers % self.gpus_per_host:
            raise ValueError(f"workers ({self.workers}) must be a multiple of gpus_per_host ({self.gpus_per_host})")
        if self.workers <= self.gpus_per_host * self.hosts_per_rack:
            raise ValueError(f"workers ({self.workers}) must fill more than one rack of "
                             f"{self.gpus_per_host * self.hosts_per_rack}: a worker outside the failing rack dies too")


@dataclass
class SimResult:
    config: dict[str, Any]
    placement_wall_s: list[float] = field(default_factory=list)  # real code, measured
    placement_modelled_s: list[float] = field(default_factory=list)  # + modelled round trips
    asks: list[int] = field(default_factory=list)
    refused: int = 0
    ops_per_s: list[int] = field(default_factory=list)  # directory commands in each simulated second
    timeline: list[dict[str, float]] = field(default_factory=list)
    imbalance: dict[str, float] = field(default_factory=dict)
    loads_at_ramp_end: list[float] = field(default_factory=list)
    failover: dict[str, dict[str, Any]] = field(default_factory=dict)  # per failure event

    def summary(self) -> dict[str, Any]:
        def pct(xs: list[float], q: float) -> float:
            return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0

        totals = self.ops_per_s
        return {
            "placed": len(self.placement_wall_s), "refused": self.refused,
            "placement_wall_ms": {"p50": 1e3 * pct(self.placement_wall_s, 0.5), "p99": 1e3 * pct(self.placement_wall_s, 0.99),
                                  "max": 1e3 * max(self.placement_wall_s, default=0.0)},
            "placement_modelled_ms": {"p50": 1e3 * pct(self.placement_modelled_s, 0.5),
                                      "p99": 1e3 * pct(self.placement_modelled_s, 0.99)},
            "asks": {"mean": statistics.fmean(self.asks) if self.asks else 0.0, "max": max(self.asks, default=0)},
            "directory_ops_per_s": {"mean": statistics.fmean(totals) if totals else 0.0, "max": max(totals, default=0)},
            "imbalance": self.imbalance, "failover": self.failover,
        }


class _Fleet:
    """The simulated workers and how the real code reaches them."""

    def __init__(self, config: SimConfig) -> None:
        per_rack = config.gpus_per_host * config.hosts_per_rack
        self.workers: dict[str, SimWorker] = {}
        for i in range(config.workers):
            rack, host, gpu = i // per_rack, i // config.gpus_per_host, i % config.gpus_per_host
            key = f"r{rack:03d}-h{host:04d}/cuda:{gpu}"
            self.workers[key] = SimWorker(key, f"r{rack:03d}", config.cost, instance_id=i + 1)
        self.by_id: dict[str, SimSession] = {}

    def live(self, key: str) -> SimWorker:
        worker = self.workers[key]
        if not worker.alive:
            raise WorkerUnreachable(f"{key} is down")
        return worker

    def asker(self, session: SimSession) -> Callable[[WorkerCapacity], Any]:
        async def ask(w: WorkerCapacity) -> Admitted | Refusal:
            return self.live(w.worker).admit(session)
        return ask

    async def resume(self, w: WorkerCapacity, sid: str) -> Admitted | Refusal:
        return self.live(w.worker).admit(self.by_id[sid])

    async def abandon(self, w: WorkerCapacity, sid: str) -> None:
        self.workers[w.worker].drop(sid)


def _imbalance(loads: list[float]) -> dict[str, float]:
    mean = statistics.fmean(loads)
    return {"mean_load": mean, "max_load": max(loads), "min_load": min(loads),
            "max_over_mean": max(loads) / mean if mean else 0.0,
            "cv": statistics.pstdev(loads) / mean if mean else 0.0,
            "jain": sum(loads) ** 2 / (len(loads) * sum(x * x for x in loads)) if mean else 0.0,
            "overloaded_workers": float(sum(x > 1.0 for x in loads))}


async def _run(config: SimConfig, progress: Callable[[str], None]) -> SimResult:
    now = [0.0]
    directory = MemoryDirectory(lambda: now[0], ttl_s=config.ttl_s)
    fleet = _Fleet(config)
    placements = [Placement(directory, max_asks=config.max_asks, clock=lambda: now[0], wall_clock=lambda: now[0]) for _ in range(config.gateways)]
    monitors = [FailoverMonitor(directory, p, fleet.resume, fleet.abandon) for p in placements]
    sessions = draw_sessions(config.sessions, config.arrival_s, config.world_share, config.cost, config.seed)
    fleet.by_id = {s.session_id: s for s in sessions}
    result = SimResult(config=asdict(config))
    keys = sorted(fleet.workers)
    racks = sorted({w.rack for w in fleet.workers.values()})
    doomed_rack = racks[len(racks) // 2]
    lone = next(k for k in keys[len(keys) // 3:] if fleet.workers[k].rack != doomed_rack)
    events = {config.arrival_s + config.worker_failure_after_s: ("worker", [lone]),
              config.arrival_s + config.rack_failure_after_s: ("rack " + doomed_rack,
                                                               [k for k in keys if fleet.workers[k].rack == doomed_rack])}
    died_at: dict[str, tuple[str, float]] = {}  # session -> (event, time its worker died)
    back_at: dict[str, float] = {}
    nxt = 0
    last_ops = sum(directory.ops.values())
    for tick in range(config.arrival_s + config.after_s):
        now[0] = float(tick)
        for w in fleet.workers.values():
            if w.alive:
                await directory.publish(w.record(now[0]))
        while nxt < len(sessions) and sessions[nxt].arrives_at < tick + 1:
            s = sessions[nxt]
            ops0 = sum(directory.ops.values())
            t0 = time.perf_counter()
            try:
                placed = await placements[nxt % config.gateways].place(s.mode, fleet.asker(s))
            except NoWorkerAdmits:
                result.refused += 1
            else:
                wall = time.perf_counter() - t0
                result.placement_wall_s.append(wall)
                result.asks.append(placed.asked)
                result.placement_modelled_s.append(wall + placed.asked * config.rtt_ask_s
                                                   + (sum(directory.ops.values()) - ops0) * config.rtt_op_s)
            nxt += 1
        if tick == config.arrival_s - 1:
            result.loads_at_ramp_end = [w.actual_load() for w in fleet.workers.values()]
            result.imbalance = _imbalance(result.loads_at_ramp_end)
        if tick in events:
            name, victims = events[tick]
            for key in victims:
                fleet.workers[key].alive = False
                for sid in fleet.workers[key].sessions:
                    died_at[sid] = (name, now[0])
                    back_at.pop(sid, None)
                fleet.workers[key].sessions.clear()
            progress(f"t={tick}s: {name} down ({len(victims)} workers)")
        for monitor in monitors:
            t0 = time.perf_counter()
            report = await monitor.sweep()
            # one sweeper moves its sessions one after another: each waits for those before it
            # (the code's measured time plus a control call and three directory commands, modelled)
            per_move = (time.perf_counter() - t0) / max(1, len(report.moved)) + config.rtt_ask_s + 3 * config.rtt_op_s
            for i, sid in enumerate(report.moved):
                back_at[sid] = now[0] + config.resume_s + (i + 1) * per_move
        ops = sum(directory.ops.values())
        result.ops_per_s.append(ops - last_ops)
        last_ops = ops
        out = sum(1 for sid in died_at if back_at.get(sid, float("inf")) > now[0])
        total = sum(len(w.sessions) for w in fleet.workers.values())
        healthy = sum(len(w.sessions) for w in fleet.workers.values() if w.alive and w.actual_load() <= 1.0)
        result.timeline.append({"t": now[0], "sessions": float(total + out), "within": float(healthy - sum(
            1 for sid in back_at if back_at[sid] > now[0])), "out": float(out)})
        if tick % 50 == 0 or tick == config.arrival_s - 1:
            progress(f"t={tick}s: {total} sessions placed, {result.refused} refused, {out} out after failures")
    for name, _ in events.values():
        lost = [sid for sid, (n, _) in died_at.items() if n == name]
        times = [back_at[sid] - died_at[sid][1] for sid in lost if sid in back_at]
        result.failover[name] = {
            "sessions": len(lost), "back": len(times), "never_back": len(lost) - len(times),
            "max_s": max(times, default=0.0), "mean_s": statistics.fmean(times) if times else 0.0,
            "within_objective": sum(t <= config.objective_s for t in times)}
    result.config["ops_by_command"] = dict(directory.ops)
    return result


def simulate(config: SimConfig, progress: Callable[[str], None] = lambda line: None) -> SimResult:
    return asyncio.run(_run(config, progress))
