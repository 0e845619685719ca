"""The messages of admission: what is asked, what is decided, what is done about overruns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sessiond.admission.errors import AdmissionConfigError

__all__ = ["AdmissionPolicy", "AdmissionRequest", "Decision", "KvBudget", "Objectives", "OverrunAction"]


@dataclass(frozen=True)
class Objectives:
    """What every admitted session is promised, in terms a user recognises (published in
    /v1/capacity; the replayer's `slo`). World: frames arrive before their playback deadline (at
    most `world_deadline_miss` late) and an action shows in a frame within
    `world_action_to_photon_p95_ms` at p95. Director: playback of a segment may start at most
    `director_start_delay_p95_s` after its `direct` (p95), and once started it never stalls.
    `director_tail` is the share of director segments allowed to miss (the p95); `playout_ms`
    the world player's jitter allowance, also the margin added to a director's start delay."""

    world_deadline_miss: float = 0.01
    world_action_to_photon_p95_ms: float = 1500.0
    director_start_delay_p95_s: float = 1.5
    director_tail: float = 0.05
    playout_ms: float = 100.0

    def __post_init__(self) -> None:
        for name in ("world_deadline_miss", "director_tail"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise AdmissionConfigError(name, f"must be in [0, 1], got {getattr(self, name)}")
        for name in ("world_action_to_photon_p95_ms", "director_start_delay_p95_s"):
            if getattr(self, name) <= 0:
                raise AdmissionConfigError(name, f"must be > 0, got {getattr(self, name)}")
        if self.playout_ms < 0:
            raise AdmissionConfigError("playout_ms", f"must be >= 0, got {self.playout_ms}")

    def to_json(self) -> dict[str, float]:
        return {"world_deadline_miss": self.world_deadline_miss,
                "world_action_to_photon_p95_ms": self.world_action_to_photon_p95_ms,
                "director_start_delay_p95_s": self.director_start_delay_p95_s, "director_tail": self.director_tail,
                "playout_ms": self.playout_ms}

    def describe(self) -> dict[str, dict[str, Any]]:
        """The objectives as /v1/capacity publishes them: per mode, each figure with its bound
        and a sentence a user recognises."""
        return {
            "world": {
                "deadline_miss_rate": {"max": self.world_deadline_miss, "says": "frames arrive before their playback "
                                       f"deadline (at most {self.world_deadline_miss:.0%} late, "
                                       f"{self.playout_ms:.0f} ms playout buffer)"},
                "action_to_photon_p95_ms": {"max": self.world_action_to_photon_p95_ms,
                                            "says": "a control input shows in the picture within "
                                            f"{self.world_action_to_photon_p95_ms:.0f} ms (p95)"},
            },
            "director": {
                "start_delay_p95_s": {"max": self.director_start_delay_p95_s,
                                      "says": "playback of a segment may start within "
                                      f"{self.director_start_delay_p95_s:g} s of its direction (p95)"},
                "stalls": {"max": 0, "says": "once started, a segment plays to its end without a stall"},
                "risk": {"max": self.director_tail, "says": f"at most {self.director_tail:.0%} of segments may "
                         "miss these (admission's stated risk)"},
            },
        }

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
    reason: str  # ok | never | full | load | burst | kv | queued | uncalibrated | max_sessions
    predicted_load: float  # sum of duty x cost rate with the newcomer
    load_budget: float  # 1 - margin
    retry_after_s: float | None = None  # None: waiting cannot help (the session can never fit)
    queue_position: int | None = None  # one-per-gpu: 1-based place in the wait list
    detail: str = ""

    def error_body(self) -> dict[str, Any]:
        """The docs/protocol.md failure body of a refusal (`503` `capacity`)."""
        body: dict[str, Any] = {"code": "capacity", "message": self.detail or f"over capacity ({self.reason})"}
        if self.retry_after_s is not None:
            body["retry_after_s"] = self.retry_after_s
        body["reason"] = self.reason
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
