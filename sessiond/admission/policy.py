"""Duty-cycle admission: admit while every admitted session stays within its objective.

With the newcomer at its prior, four checks, in order:
1. load: the predicted mean load ``sum(duty_i) x cost_rate(b)`` (GPU seconds per wall second, ``b``
   the batch the demanding sessions are expected to share: floor of the summed duties, at least 1,
   at most ``max_batch``) stays <= ``1 - margin``;
2. burst: for every session, the probability that when it demands, enough others demand with it
   that the group of k needs ``k x cost_rate(k)`` > ``1 - margin`` stays within its objective's
   tolerance (world: the deadline-miss rate; director: the 5% beyond p95). The mean alone
   over-admits bursty directors: four at duty 0.3 on an engine where two together already fall
   behind real time are within the mean but miss most segments;
3. ttff: a director's predicted time to first frame (a steady chunk at that batch, slowed by the
   GPU share the others use) meets its objective;
4. kv: the KV budget holds every session (demanding ones on device, idle ones possibly offloaded).
Otherwise a refusal with Retry-After from the model.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

from sessiond.admission.burst import worst_overload
from sessiond.admission.costmodel import CostModel
from sessiond.admission.decision import AdmissionRequest, Decision, KvBudget, Objectives, OverrunAction
from sessiond.admission.duty import DutyTracker
from sessiond.admission.errors import AdmissionConfigError

__all__ = ["DutyPolicy", "PolicyBase"]


class PolicyBase(ABC):
    """What every policy shares: the cost model, the duty tracker, the KV budget and the objectives,
    the load arithmetic, the overrun check and the /v1/capacity snapshot."""

    name = "base"
    scheduling = "deadline"

    def __init__(self, cost: CostModel, tracker: DutyTracker, *, objectives: Objectives | None = None,
                 kv: KvBudget | None = None, margin: float = 0.15, max_batch: int = 8,
                 retry_min_s: float = 1.0, retry_max_s: float = 60.0, kv_retry_s: float = 30.0,
                 overrun_tolerance: float = 0.1) -> None:
        if not 0.0 <= margin < 1.0:
            raise AdmissionConfigError("margin", f"must be in [0, 1), got {margin}")
        if max_batch < 1:
            raise AdmissionConfigError("max_batch", f"must be >= 1, got {max_batch}")
        if not 0 < retry_min_s <= retry_max_s:
            raise AdmissionConfigError("retry_min_s", f"need 0 < retry_min_s <= retry_max_s, got {retry_min_s}, "
                                       f"{retry_max_s}")
        self.cost = cost
        self.tracker = tracker
        self.objectives = objectives or Objectives()
        self.kv = kv
        self.margin = margin
        self.max_batch = max_batch
        self.retry_min_s = retry_min_s
        self.retry_max_s = retry_max_s
        self.kv_retry_s = kv_retry_s
        self.overrun_tolerance = overrun_tolerance
        self.decisions: dict[str, int] = {}  # reason -> count

    @abstractmethod
    def decide(self, request: AdmissionRequest) -> Decision:
        """Admit (and register) or refuse a create / resume."""

    @property
    def load_budget(self) -> float:
        return 1.0 - self.margin

    def expected_batch(self, total_duty: float) -> int:
        return max(1, min(self.max_batch, math.floor(total_duty + 1e-9)))

    def load(self, now: float, extra_duty: float = 0.0, exclude: str | None = None) -> tuple[float, float]:
        """(predicted load, summed duty) of the tracked sessions plus `extra_duty`."""
        total = extra_duty + sum(self.tracker.duty(s, now) for s in self.tracker.sessions() if s != exclude)
        if total <= 0 or not self.cost.calibrated():
            return 0.0, total
        return total * self.cost.cost_rate(self.expected_batch(total)), total

    def overloaded(self, group: int) -> bool:
        """A group of `group` sessions generating together needs more than the budget (a session
        alone over the budget is an engine limit, not a burst)."""
        return group >= 2 and group * self.cost.cost_rate(min(group, self.max_batch)) > self.load_budget + 1e-12

    def release(self, session_id: str, now: float) -> list[str]:
        self.tracker.remove(session_id)
        return []

    async def wait(self, request: AdmissionRequest, timeout_s: float) -> bool:
        return False  # no wait list here (one-per-gpu keeps one)

    def overruns(self, now: float) -> list[OverrunAction]:
        """Over budget on measured load: world sessions above prior + tolerance lose their lead;
        sessions not demanding right now have their idle state offloaded."""
        load, _ = self.load(now)
        if load <= self.load_budget:
            return []
        actions: list[OverrunAction] = []
        for sid in sorted(self.tracker.sessions()):
            duty, prior = self.tracker.duty(sid, now), self.tracker.prior(sid)
            measured = self.tracker.measured(sid, now)
            demanding = self.tracker.demanding(sid, now)
            if demanding and measured is not None and measured > prior + self.overrun_tolerance:
                actions.append(OverrunAction(sid, "degrade_lead", duty, prior))
            elif not demanding:
                actions.append(OverrunAction(sid, "offload_idle", duty, prior))
        return actions

    def snapshot(self, now: float) -> dict[str, Any]:
        load, total = self.load(now)
        demanding = sum(self.tracker.demanding(s, now) for s in self.tracker.sessions())
        return {"policy": self.name, "scheduling": self.scheduling, "margin": self.margin,
                "load_budget": self.load_budget, "predicted_load": load, "summed_duty": total,
                "expected_batch": self.expected_batch(total), "sessions": len(self.tracker.sessions()),
                "demanding": demanding, "objectives": self.objectives.to_json(),
                "kv": self.kv.to_json() if self.kv else None, "priors": self.tracker.priors.to_json(),
                "duty_window_s": self.tracker.window_s, "decisions": dict(self.decisions),
                "per_session": self.tracker.snapshot(now), "cost_model": self.cost.snapshot(self.max_batch)}

    def _decision(self, admitted: bool, reason: str, load: float, **kw: Any) -> Decision:
        self.decisions[reason] = self.decisions.get(reason, 0) + 1
        return Decision(admitted, self.name, reason, load, self.load_budget, **kw)

    def _kv_fits(self, request: AdmissionRequest) -> bool:
        if self.kv is None:
            return True
        others = [s for s in self.tracker.sessions() if s != request.session_id]
        demanding = sum(self.tracker.demanding(s, request.now) for s in others)
        return self.kv.fits(len(others) + 1, demanding + 1)

    def _register(self, request: AdmissionRequest) -> None:
        if request.session_id not in self.tracker:
            self.tracker.add(request.session_id, request.mode, request.now)

    def _retry(self, seconds: float) -> float:
        return round(min(self.retry_max_s, max(self.retry_min_s, seconds)), 3)


class DutyPolicy(PolicyBase):
    """The design's policy: duty x cost under 1 - margin, director ttff, KV budget."""

    name = "duty"

    def decide(self, request: AdmissionRequest) -> Decision:
        now = request.now
        if not self.cost.calibrated():
            return self._decision(False, "uncalibrated", 0.0, retry_after_s=self._retry(self.retry_min_s),
                                  detail="the cost model is still calibrating; retry shortly")
        prior = self.tracker.priors.prior(request.mode)
        others_load, _ = self.load(now, exclude=request.session_id)
        load, total = self.load(now, extra_duty=prior, exclude=request.session_id)
        window = self.tracker.window_s
        if load > self.load_budget + 1e-12:
            alone = prior * self.cost.cost_rate(1)
            wait = window * (load - self.load_budget) / others_load if others_load > 0 else self.retry_max_s
            return self._decision(False, "load", load, retry_after_s=self._retry(wait),
                                  detail=f"predicted GPU load {load:.3f} would exceed {self.load_budget:.3f} "
                                  f"(1 - margin {self.margin}); a new {request.mode} session alone costs {alone:.3f}")
        others = [sid for sid in self.tracker.sessions() if sid != request.session_id]
        duties = [self.tracker.duty(sid, now) for sid in others] + [prior]
        tolerances = [self.objectives.tolerance(self.tracker.mode(sid)) for sid in others]
        tolerances.append(self.objectives.tolerance(request.mode))
        index, p_over, tolerance = worst_overload(duties, tolerances, self.overloaded)
        if p_over > tolerance + 1e-12:
            who = "the new session" if index == len(others) else f"session {others[index]}"
            wait = window * (p_over - tolerance) / p_over
            return self._decision(False, "burst", load, retry_after_s=self._retry(wait),
                                  detail=f"{who} would find the GPU over {self.load_budget:.3f} with the others "
                                  f"demanding at once {p_over:.1%} of the time (objective allows {tolerance:.1%})")
        if request.mode == "director":
            chunk = self.cost.predict_chunk(self.expected_batch(total), self.cost.steady_context())
            share = max(0.05, 1.0 - others_load)
            ttff = chunk / share
            if ttff > self.objectives.director_ttff_p95_s:
                allowed = 1.0 - chunk / self.objectives.director_ttff_p95_s
                wait = window * (others_load - allowed) / others_load if others_load > 0 else self.retry_max_s
                return self._decision(False, "ttff", load, retry_after_s=self._retry(wait),
                                      detail=f"predicted time to first frame {ttff:.3f} s would exceed the "
                                      f"objective {self.objectives.director_ttff_p95_s} s")
        if not self._kv_fits(request):
            return self._decision(False, "kv", load, retry_after_s=self._retry(self.kv_retry_s),
                                  detail="the KV budget (device plus host offload) cannot hold another session")
        self._register(request)
        return self._decision(True, "ok", load)
