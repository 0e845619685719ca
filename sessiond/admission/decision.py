"""The messages of admission: what is asked, what is decided, what is done about overruns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sessiond.admission.errors import AdmissionConfigError

__all__ = ["AdmissionPolicy", "AdmissionRequest", "Decision", "KvBudget", "Objectives", "OverrunAction"]


@dataclass(frozen=True)
class Objectives:
    """What every admitted session is promised (docs/traces.md `slo`)."""

    world_deadline_miss: float = 0.01  # world: share of frames after their playback deadline
    director_ttff_p95_s: float = 2.0  # director: time to first frame, p95
    director_rtf: float = 1.0  # director: a segment completes within rtf x its media duration
    director_tail: float = 0.05  # director: share of segments that may miss (the p95 objectives)
    playout_ms: float = 100.0  # client jitter allowance before a frame counts as late

    def __post_init__(self) -> None:
        for name in ("world_deadline_miss", "director_tail"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise AdmissionConfigError(name, f"must be in [0, 1], got {getattr(self, name)}")
        for name in ("director_ttff_p95_s", "director_rtf"):
            if getattr(self, name) <= 0:
                raise AdmissionConfigError(name, f"must be > 0, got {getattr(self, name)}")
        if self.playout_ms < 0:
            raise AdmissionConfigError("playout_ms", f"must be >= 0, got {self.playout_ms}")

    def to_json(self) -> dict[str, float]:
        return {"world_deadline_miss": self.world_deadline_miss, "director_ttff_p95_s": self.director_ttff_p95_s,
                "director_rtf": self.director_rtf, "director_tail": self.director_tail, "playout_ms": self.playout_ms}

    def tolerance(self, mode: str) -> float:
        """The share of a session's time (world) or segments (director) allowed to fall behind."""
        return self.director_tail if mode == "director" else self.world_deadline_miss


@dataclass(frozen=True)
class KvBudget:
    """Session KV memory: device bytes, pinned-host bytes for offloaded state, bytes per session."""

    device_bytes: int
    host_bytes: int
    per_session_bytes: int

    def __post_init__(self) -> None:
        if self.per_session_bytes <= 0 or self.device_bytes < 0 or self.host_bytes < 0:
            raise AdmissionConfigError("kv_budget", "per_session_bytes must be > 0 and budgets >= 0, got "
                                       f"{self.per_session_bytes}, {self.device_bytes}, {self.host_bytes}")

    def fits(self, sessions: int, demanding: int) -> bool:
        """Every session fits on device or host, and the demanding ones on device."""
        per = self.per_session_bytes
        return sessions * per <= self.device_bytes + self.host_bytes and demanding * per <= self.device_bytes

    def to_json(self) -> dict[str, int]:
        return {"device_bytes": self.device_bytes, "host_bytes": self.host_bytes,
                "per_session_bytes": self.per_session_bytes,
                "max_resident": self.device_bytes // self.per_session_bytes,
                "max_total": (self.device_bytes + self.host_bytes) // self.per_session_bytes}


@dataclass(frozen=True)
class AdmissionRequest:
    session_id: str
    mode: str  # "world" | "director"
    kind: str  # "create" | "resume"
    now: float  # monotonic seconds


@dataclass(frozen=True)
class Decision:
    admitted: bool
    policy: str
    reason: str  # ok | load | burst | ttff | kv | queued | uncalibrated
    predicted_load: float  # sum of duty x cost rate with the newcomer
    load_budget: float  # 1 - margin
    retry_after_s: float | None = None
    queue_position: int | None = None  # one-per-gpu: 1-based place in the wait list
    detail: str = ""

    def error_body(self) -> dict[str, Any]:
        """The docs/protocol.md failure body of a refusal (`503` `capacity`)."""
        body: dict[str, Any] = {"code": "capacity", "message": self.detail or f"over capacity ({self.reason})"}
        if self.retry_after_s is not None:
            body["retry_after_s"] = self.retry_after_s
        return {"error": body}

    def to_json(self) -> dict[str, Any]:
        return {"admitted": self.admitted, "policy": self.policy, "reason": self.reason,
                "predicted_load": self.predicted_load, "load_budget": self.load_budget,
                "retry_after_s": self.retry_after_s, "queue_position": self.queue_position, "detail": self.detail}


@dataclass(frozen=True)
class OverrunAction:
    """What the scheduler should do about a session over its prior while the GPU is over budget."""

    session_id: str
    action: str  # "degrade_lead": cut the offender's world lead to one chunk; "offload_idle": move idle KV to host
    duty: float
    prior: float


class AdmissionPolicy(Protocol):
    """What the daemon calls. ``decide`` registers an admitted session itself (so two creates can
    never both pass one check); ``release`` is called on close, on offload-close and after a failed open."""

    name: str
    scheduling: str  # "deadline" (our scheduler orders by deadline) | "fifo" (request order)

    def decide(self, request: AdmissionRequest) -> Decision: ...

    def release(self, session_id: str, now: float) -> list[str]:
        """Forget a session; returns the ids it admitted from a wait list as a result (may be empty)."""
        ...

    def overruns(self, now: float) -> list[OverrunAction]: ...

    async def wait(self, request: AdmissionRequest, timeout_s: float) -> bool:
        """After a `queued` refusal: True once the request was admitted from the wait list
        within `timeout_s`, False when it was not (a policy without a wait list: at once)."""
        ...

    def snapshot(self, now: float) -> dict[str, Any]: ...
