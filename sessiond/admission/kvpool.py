"""`KVPoolAdmission` (`--policy kv`, the default): admit while the engine's KV pool has room for
one more session and the session count is under `max_sessions`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from engine.api import KVStats, ModelInfo
from sessiond.admission.decision import AdmissionRequest, Decision, OverrunAction

__all__ = ["KVPoolAdmission"]


class KVPoolAdmission:
    """Admit while a session's KV fits in the free device slabs (offloaded sessions do not count)
    and fewer than `max_sessions` are open."""

    name = "kv"
    scheduling = "deadline"

    def __init__(self, info: ModelInfo, kv: Callable[[], KVStats | None], max_sessions: int,
                 retry_after_s: float = 5.0) -> None:
        self.info = info
        self._kv = kv
        self.max_sessions = max_sessions
        self.retry_after_s = retry_after_s
        self._admitted: set[str] = set()
        self.decisions: dict[str, int] = {}

    def _slabs_per_session(self, kv: KVStats) -> int:
        return max(1, math.ceil(self.info.kv_bytes_per_session / max(1, kv.slab_bytes)))

    def decide(self, request: AdmissionRequest) -> Decision:
        kv = self._kv()
        if request.session_id not in self._admitted and len(self._admitted) >= self.max_sessions:
            return self._decision(False, "max_sessions", f"{self.max_sessions} sessions are open (max_sessions)")
        if kv is not None and kv.slabs_free < self._slabs_per_session(kv):
            return self._decision(False, "kv", f"the KV pool has {kv.slabs_free} free slabs; a session needs "
                                  f"{self._slabs_per_session(kv)}")
        self._admitted.add(request.session_id)
        return self._decision(True, "ok", "")

    def room(self) -> tuple[int, int]:
        """(sessions open, sessions it would still admit: free slabs and the session limit)."""
        kv = self._kv()
        room = max(0, self.max_sessions - len(self._admitted))
        if kv is not None:
            room = min(room, kv.slabs_free // self._slabs_per_session(kv))
        return len(self._admitted), room

    def release(self, session_id: str, now: float) -> list[str]:
        self._admitted.discard(session_id)
        return []

    def overruns(self, now: float) -> list[OverrunAction]:
        return []  # no duty measured, nothing to answer

    async def wait(self, request: AdmissionRequest, timeout_s: float) -> bool:
        return False  # no wait list: a refusal is final

    def snapshot(self, now: float) -> dict[str, Any]:
        kv = self._kv()
        return {"policy": self.name, "sessions": len(self._admitted), "max_sessions": self.max_sessions,
                "kv_bytes_per_session": self.info.kv_bytes_per_session,
                "kv_slabs_free": kv.slabs_free if kv else None,
                "kv_slabs_per_session": self._slabs_per_session(kv) if kv else None,
                "decisions": dict(self.decisions)}

    def _decision(self, ok: bool, reason: str, detail: str) -> Decision:
        self.decisions[reason] = self.decisions.get(reason, 0) + 1
        return Decision(admitted=ok, policy=self.name, reason=reason, predicted_load=0.0, load_budget=1.0,
                        retry_after_s=None if ok else self.retry_after_s, detail=detail)
