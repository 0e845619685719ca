"""The policies the design is compared against.

``one-per-gpu``: one session per GPU, later arrivals wait in a FIFO list (the Dreamverse policy).
``fifo``: every request admitted while the KV budget holds it, served in request order, with no
duty-cycle admission. Both still publish the predicted load so that reports can compare.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

from sessiond.admission.decision import AdmissionRequest, Decision
from sessiond.admission.policy import PolicyBase

__all__ = ["FifoPolicy", "OnePerGpuPolicy"]

logger = logging.getLogger(__name__)


class FifoPolicy(PolicyBase):
    name = "fifo"
    scheduling = "fifo"

    def decide(self, request: AdmissionRequest) -> Decision:
        load, _ = self.load(request.now, extra_duty=self.tracker.prior_of(request.mode),
                            exclude=request.session_id)
        if (capped := self._at_max_sessions(request, load)) is not None:
            return capped
        if not self._kv_fits(request):
            return self._decision(False, "kv", load, retry_after_s=self._retry(self.kv_retry_s),
                                  detail="the KV budget (device plus host offload) cannot hold another session")
        self._register(request)
        return self._decision(True, "ok", load)


class OnePerGpuPolicy(PolicyBase):
    """``gpus`` slots. A request finding them taken is refused as ``queued`` with its place; a daemon
    that keeps the request open awaits :meth:`wait`, which joins the FIFO wait list and returns
    once a release hands it a slot. Requests nobody waits for never hold a place. A free slot is
    still refused as ``max_sessions`` while that many are open (binds only below ``gpus``)."""

    name = "one-per-gpu"
    scheduling = "fifo"

    def __init__(self, *args: Any, gpus: int = 1, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gpus = gpus
        self._waiting: OrderedDict[str, AdmissionRequest] = OrderedDict()
        self._events: dict[str, asyncio.Event] = {}

    def decide(self, request: AdmissionRequest) -> Decision:
        load, _ = self.load(request.now, extra_duty=self.tracker.prior_of(request.mode),
                            exclude=request.session_id)
        if request.session_id in self.tracker:
            return self._decision(True, "ok", load)
        if len(self.tracker.sessions()) < self.gpus and not self._waiting:
            if (capped := self._at_max_sessions(request, load)) is not None:
                return capped
            self._register(request)
            return self._decision(True, "ok", load)
        position = len(self._waiting) + (0 if request.session_id in self._waiting else 1)
        return self._decision(False, "queued", load, queue_position=position,
                              retry_after_s=self._retry(self.kv_retry_s * position),
                              detail=f"all {self.gpus} GPU slot(s) are taken; place {position} in the wait list")

    def release(self, session_id: str, now: float) -> list[str]:
        self.tracker.remove(session_id, now)
        self._waiting.pop(session_id, None)
        self._events.pop(session_id, None)
        admitted: list[str] = []
        most = self.gpus if self.max_sessions is None else min(self.gpus, self.max_sessions)
        while self._waiting and len(self.tracker.sessions()) < most:
            sid, request = self._waiting.popitem(last=False)
            self.tracker.add(sid, request.mode, now)
            admitted.append(sid)
            event = self._events.pop(sid, None)
            if event is not None:
                event.set()
        return admitted

    async def wait(self, request: AdmissionRequest, timeout_s: float) -> bool:
        """Join the wait list (FIFO) and wait for a slot; False, and out of the list, on timeout."""
        sid = request.session_id
        if sid in self.tracker:
            return True
        self._waiting.setdefault(sid, request)
        event = self._events.setdefault(sid, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            logger.info("session %s left the wait list after %.1f s", sid, timeout_s)
        finally:  # timed out or cancelled (the client went away): leave the list
            if sid not in self.tracker:
                self._waiting.pop(sid, None)
                self._events.pop(sid, None)
        return sid in self.tracker

    def waiting(self) -> list[str]:
        return list(self._waiting)

    def snapshot(self, now: float) -> dict[str, Any]:
        return {**super().snapshot(now), "gpus": self.gpus, "waiting": len(self._waiting)}
