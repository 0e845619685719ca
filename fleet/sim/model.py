"""Simulated workers and sessions: a cost model (GPU seconds per media second per mode) and duty
cycles. A worker's admission predicts load from each session's prior duty, as the daemon does;
reality uses each session's actual duty, so a prediction can be wrong in both directions."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from fleet.daemon_port import DaemonCapacity
from fleet.messages import WorkerCapacity
from fleet.placement import Admitted, Refusal

__all__ = ["CostModel", "SimSession", "SimWorker", "draw_sessions"]


@dataclass(frozen=True)
class CostModel:
    """Per mode: GPU seconds per media second while generating (`rate`) and the prior duty (share of
    wall time a session generates) admission assumes; `budget` is the admitted-load ceiling."""

    rate: dict[str, float] = field(default_factory=lambda: {"world": 0.05, "director": 0.10})
    prior_duty: dict[str, float] = field(default_factory=lambda: {"world": 0.85, "director": 0.35})
    duty_concentration: float = 20.0  # actual duty ~ Beta with the prior as mean; larger: closer to it
    budget: float = 0.9
    kv_sessions: int = 32  # sessions whose KV fits one device
    retry_after_s: float = 5.0

    def predicted(self, mode: str) -> float:
        return self.rate[mode] * self.prior_duty[mode]


@dataclass(frozen=True)
class SimSession:
    session_id: str
    mode: str
    duty: float  # actual
    arrives_at: float


def draw_sessions(n: int, arrival_s: float, world_share: float, cost: CostModel, seed: int) -> list[SimSession]:
    """`n` sessions arriving uniformly over `arrival_s` seconds, seeded."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        mode = "world" if rng.random() < world_share else "director"
        mean = cost.prior_duty[mode]
        k = cost.duty_concentration
        out.append(SimSession(f"s{i:06d}", mode, rng.betavariate(mean * k, (1 - mean) * k), rng.uniform(0, arrival_s)))
    return sorted(out, key=lambda s: s.arrives_at)


class SimWorker:
    """A worker as placement sees it: admission on predicted load, capacity records like a daemon's."""

    def __init__(self, key: str, rack: str, cost: CostModel, instance_id: int) -> None:
        self.key = key
        self.rack = rack
        self.cost = cost
        self.instance_id = instance_id
        self.alive = True
        self.sessions: dict[str, SimSession] = {}
        self.predicted_load = 0.0

    def actual_load(self) -> float:
        return sum(self.cost.rate[s.mode] * s.duty for s in self.sessions.values())

    def admit(self, session: SimSession) -> Admitted | Refusal:
        need = self.cost.predicted(session.mode)
        if len(self.sessions) >= self.cost.kv_sessions:
            return Refusal(self.key, self.cost.retry_after_s, "KV pool full")
        if self.predicted_load + need > self.cost.budget:
            return Refusal(self.key, self.cost.retry_after_s, "over the load budget")
        self.sessions[session.session_id] = session
        self.predicted_load += need
        return Admitted(session.session_id, {"session_id": session.session_id, "worker": self.key})

    def drop(self, session_id: str) -> None:
        gone = self.sessions.pop(session_id, None)
        if gone is not None:
            self.predicted_load -= self.cost.predicted(gone.mode)

    def capacity(self) -> DaemonCapacity:
        free = self.cost.budget - self.predicted_load
        return DaemonCapacity(headroom={"world": free, "director": free},
                              cost={m: self.cost.predicted(m) for m in self.cost.rate},
                              kv_free_sessions=self.cost.kv_sessions - len(self.sessions), sessions=len(self.sessions))

    def record(self, now: float) -> WorkerCapacity:
        cap = self.capacity()
        return WorkerCapacity(worker=self.key, instance_id=self.instance_id, base_url=f"http://{self.key}",
                              headroom=cap.headroom, cost=cap.cost, kv_free_sessions=cap.kv_free_sessions,
                              sessions=cap.sessions, rack=self.rack, published_at=now)
