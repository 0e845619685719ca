"""What the fleet's parts tell each other: a worker's capacity record and a session's binding."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Binding", "WorkerCapacity"]


@dataclass(frozen=True)
class WorkerCapacity:
    """One worker's published capacity: what placement orders workers by. `headroom[mode]` is the
    share of the worker's load budget still free as its cost model predicts it; `cost[mode]` is the
    share one more session of that mode would take (placement debits it locally between records)."""

    worker: str  # stable key: host + device, e.g. "gpu-node-3/cuda:1"
    instance_id: int  # the runtime's id of this worker's control endpoint (changes on restart)
    base_url: str  # the worker's public HTTP base: media URLs are built from it
    headroom: dict[str, float]
    cost: dict[str, float]
    kv_free_sessions: int
    sessions: int
    draining: bool = False
    rack: str = ""
    published_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> WorkerCapacity:
        return cls(worker=str(obj["worker"]), instance_id=int(obj["instance_id"]), base_url=str(obj["base_url"]),
                   headroom={str(k): float(v) for k, v in obj["headroom"].items()},
                   cost={str(k): float(v) for k, v in obj["cost"].items()},
                   kv_free_sessions=int(obj["kv_free_sessions"]), sessions=int(obj["sessions"]),
                   draining=bool(obj.get("draining", False)), rack=str(obj.get("rack", "")),
                   published_at=float(obj.get("published_at", 0.0)))

    def can_take(self, mode: str) -> bool:
        return not self.draining and self.kv_free_sessions > 0 and self.headroom.get(mode, 0.0) > 0.0


@dataclass(frozen=True)
class Binding:
    """Which worker owns a session, and the epoch of that ownership (bumped by every re-placement)."""

    session_id: str
    worker: str
    epoch: int
    mode: str = ""
    extra: dict[str, str] = field(default_factory=dict)
