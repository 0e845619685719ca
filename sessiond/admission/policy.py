"""Duty-cycle admission: admit while every admitted session stays within its objective.

With the newcomer at its prior (a director's as the daemon measured it, `duty.DirectorPrior`), in order:
1. never: one session of its mode alone on the engine must meet its objective
   (`feasibility.GroupModel.alone`); otherwise the refusal says what it needs and what the engine
   has, with no Retry-After (waiting cannot help);
2. load: the predicted mean load ``sum(duty_i) x cost_rate(b)`` (engine seconds per wall second,
   ``b`` the batch the demanding sessions are expected to share: floor of the summed duties, at
   least 1, at most ``max_batch``) stays <= ``1 - margin``;
3. risk: for every session, the probability that when it demands, the others demanding with it
   (a two-type Poisson-binomial over their duties) form a group the EDF schedule cannot serve
   within objective (`feasibility.GroupModel.served_share`: world sessions in real time, directors at
   the rate their start-delay objective needs, a segment that starts a stream at the faster rate its
   lead-in chunk needs, as often as such segments come) stays within its objective's tolerance (world: the
   deadline-miss rate; director: the 5% beyond p95). The mean alone over-admits bursty
   directors;
4. kv: the KV budget holds every session (demanding ones on device, idle ones possibly offloaded).
Every policy also refuses a new session while `max_sessions` are open (checked before load).
Otherwise a refusal with Retry-After from the model. docs/admission.md states the method and
its assumptions.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

from sessiond.admission.costmodel import MARGIN_FLOOR, CostModel
from sessiond.admission.decision import AdmissionRequest, Decision, KvBudget, Objectives, OverrunAction
from sessiond.admission.duty import DutyTracker
from sessiond.admission.errors import AdmissionConfigError
from sessiond.admission.feasibility import (
    GroupModel,
    first_segments_risk,
    required_rate,
    worst_group_risk,
)
from sessiond.admission.start_verdict import Verdict

__all__ = ["DutyPolicy", "PolicyBase"]


class PolicyBase(ABC):
    """What every policy shares: the cost model, the duty tracker, the KV budget and the objectives,
    the load arithmetic, the overrun check and the /v1/capacity snapshot."""

    name = "base"
    scheduling = "deadline"

    def __init__(self, cost: CostModel, tracker: DutyTracker, *, objectives: Objectives | None = None,
                 kv: KvBudget | None = None, margin: float = 0.15, max_batch: int = 8,
                 retry_min_s: float = 1.0, retry_max_s: float = 60.0, kv_retry_s: float = 30.0,
                 overrun_tolerance: float = 0.1, segment_s: float = 5.0, max_sessions: int | None = None,
                 first_segment_window_s: float | None = None, world_lead_s: float | None = None) -> None:
        if not 0.0 <= margin < 1.0:
            raise AdmissionConfigError("margin", f"must be in [0, 1), got {margin}")
        if segment_s <= 0:
            raise AdmissionConfigError("segment_s", f"must be > 0 seconds, got {segment_s}")
        if max_batch < 1:
            raise AdmissionConfigError("max_batch", f"must be >= 1, got {max_batch}")
        if max_sessions is not None and max_sessions < 1:
            raise AdmissionConfigError("max_sessions", f"must be >= 1 when given, got {max_sessions}")
        if world_lead_s is not None and world_lead_s <= 0:
            raise AdmissionConfigError("world_lead_s", f"must be > 0 seconds when given, got {world_lead_s}")
        if first_segment_window_s is not None and first_segment_window_s < 0:
            raise AdmissionConfigError("first_segment_window_s", f"must be >= 0 seconds, got {first_segment_window_s}")
        if not 0 < retry_min_s <= retry_max_s:
            raise AdmissionConfigError("retry_min_s", f"need 0 < retry_min_s <= retry_max_s, got {retry_min_s}, "
                                       f"{retry_max_s}")
        self.cost = cost
        self.tracker = tracker
        self.objectives = objectives or Objectives()
        self.kv = kv
        self.margin_prior = margin  # the configured margin: the prior of the measured one
        self.margin_floor = min(margin, MARGIN_FLOOR)
        self.max_batch = max_batch
        self.retry_min_s = retry_min_s
        self.retry_max_s = retry_max_s
        self.kv_retry_s = kv_retry_s
        self.overrun_tolerance = overrun_tolerance
        self.segment_s = segment_s  # a director's segment length when it does not say (the daemon's default)
        self.max_sessions = max_sessions  # open sessions at most (None: no limit)
        # a world chunk is begun at most this long before it is due while others are open (None: not
        # checked): a group whose steps can hold a world chunk past it is not served (`GroupModel.world_blocked`)
        self.world_lead_s = world_lead_s
        # a director opened this recently and not yet directing, or in its first segment, is taken
        # to direct its first segment with a newcomer's (`DutyTracker.first_segment_due`); 0: off
        self.first_segment_window_s = 2.0 * segment_s if first_segment_window_s is None else first_segment_window_s
        self.decisions: dict[str, int] = {}  # reason -> count
        self.start_verdict: Verdict | None = None  # how the start settled its verdict (build.settle_start_verdict)

    @abstractmethod
    def decide(self, request: AdmissionRequest) -> Decision:
        """Admit (and register) or refuse a create / resume."""

    @property
    def margin(self) -> float:
        """The admission margin: a quantile of the cost model's measured overrun over its predictions
        (`CostModel.margin`), the configured margin its prior."""
        return self.cost.margin(self.margin_prior, self.margin_floor)[0]

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
        return total * self.rate(self.expected_batch(total)), total

    def rate(self, batch: int) -> float:
        """Engine seconds per media second of one session at this batch, by the start-up profile: the
        margin is the measured overrun over that profile (`CostModel.margin`), so planning with the
        online-corrected costs under it would count a machine running slow twice (on an H100 the
        steps' median overrun of the profile was +10% and its p95 +32%: a margin of 0.25 on costs
        already 10% up refused a second world player that fits)."""
        return self.cost.cost_rate(batch, profile=True)

    def best_batch(self, group: int) -> int:
        """The batch a group of `group` sessions is served at: the cheapest per session up to
        `max_batch` (the scheduler batches only where the cost model says batching helps)."""
        top = max(1, min(group, self.max_batch))
        return min(range(1, top + 1), key=lambda b: (self.rate(b) - 1e-12 * b, b))

    def group_cost_rate(self, group: int) -> float:
        """Engine seconds per media second of one session in a group of `group` generating together."""
        return self.rate(self.best_batch(group))

    def group_step_s(self, group: int) -> float:
        """Wall seconds until every session of the group has its next chunk (steps of the best batch)."""
        b = self.best_batch(group)
        return self.cost.predict_chunk(b, self.cost.steady_context(), profile=True) * math.ceil(group / b)

    @property
    def jitter_s(self) -> float:
        return self.objectives.playout_ms / 1000.0

    def group_model(self) -> GroupModel:
        """The group test at this budget: directors at the rate their start delay needs, a segment
        that starts a stream (its lead-in chunk first) at the faster one, as often as the tracker
        measured such segments (`DutyTracker.stream_starts`)."""
        cm = self.cost.chunk_media_s
        delay = self.objectives.director_start_delay_p95_s
        need = required_rate(self.segment_s, cm, delay, self.jitter_s)
        lead = required_rate(self.segment_s, cm, delay, self.jitter_s, lead_in_s=self.cost.lead_in_s)
        budget, top = self.load_budget, self.max_batch

        def step_s(b: int) -> float:  # as the scheduler's plan times a step (runtime.start_plan)
            return self.cost.planned_step_s(max(1, min(b, top)), budget)

        return GroupModel(cost_rate=self.group_cost_rate, chunk_seconds=self.group_step_s, chunk_media_s=cm,
                          budget=budget, director_rate=need,
                          action_to_photon_s=self.objectives.world_action_to_photon_p95_ms / 1000.0,
                          director_rate_lead=lead, lead_share=self.tracker.stream_starts.value,
                          world_lead_s=math.inf if self.world_lead_s is None else self.world_lead_s,
                          step_s=None if self.world_lead_s is None else step_s)

    def mode_capacity(self, mode: str, duty: float | None = None, limit: int = 64) -> int:
        """How many sessions of `mode` alone (each at `duty`, default its prior) the engine serves
        within objective by this model: the largest n whose group passes the never, load and risk
        checks (0 when one does not fit alone or the model is not calibrated). With identical
        sessions the risk check is a binomial sum: over k of the n - 1 others demanding, P(k) x the
        chance a group of k + 1 is not served (`GroupModel.served_share`; with no stream starts to
        plan for, P(at least g - 1 of the others demand), g the smallest infeasible group)."""
        if not self.cost.calibrated():
            return 0
        model = self.group_model()
        if not model.alone(mode)[0]:
            return 0
        duty = min(1.0, max(0.0, self.tracker.prior_of(mode) if duty is None else duty))
        tolerance = self.objectives.tolerance(mode)
        own = (1, 0) if mode == "world" else (0, 1)
        unserved = [0.0]  # by group size: the chance a group of that many is not served
        served = 0
        for n in range(1, limit + 1):
            total = n * duty
            if total * self.rate(self.expected_batch(total)) > self.load_budget + 1e-12:
                break
            unserved.append(1.0 - model.served_share(own[0] * n, own[1] * n))
            risk = sum(_binomial_pmf(n - 1, duty, k) * unserved[k + 1] for k in range(1, n))
            if risk > tolerance + 1e-12:
                break
            served = n
        return served

    def release(self, session_id: str, now: float) -> list[str]:
        self.tracker.remove(session_id, now)
        if not self.tracker.sessions():
            self.cost.settle()  # nothing open: plan the next session as the start-up profile measured
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
                "margin_from": self.cost.margin_snapshot(self.margin_prior, self.margin_floor),
                "load_budget": self.load_budget, "predicted_load": load, "summed_duty": total,
                "expected_batch": self.expected_batch(total), "sessions": len(self.tracker.sessions()),
                "max_sessions": self.max_sessions, "demanding": demanding, "objectives": self.objectives.to_json(),
                "kv": self.kv.to_json() if self.kv else None, "priors": self.tracker.priors.to_json(),
                "director_prior": self.tracker.director_prior.to_json(),
                "stream_starts": self.tracker.stream_starts.to_json(),
                "segment_s": self.segment_s, "director_required_rate": self.group_model().director_rate,
                "serves": {"world": self.mode_capacity("world"), "director": self.mode_capacity("director")},
                "duty_window_s": self.tracker.window_s, "decisions": dict(self.decisions),
                "per_session": self.tracker.snapshot(now), "cost_model": self.cost.snapshot(self.max_batch)}

    def _decision(self, admitted: bool, reason: str, load: float, **kw: Any) -> Decision:
        self.decisions[reason] = self.decisions.get(reason, 0) + 1
        return Decision(admitted, self.name, reason, load, self.load_budget, **kw)

    def _at_max_sessions(self, request: AdmissionRequest, load: float) -> Decision | None:
        """The `max_sessions` refusal of a new session (one the tracker does not hold) while
        `max_sessions` are open; None when the limit allows it. A session closing makes room."""
        if self.max_sessions is None or request.session_id in self.tracker:
            return None
        open_now = len(self.tracker.sessions())
        if open_now < self.max_sessions:
            return None
        return self._decision(False, "max_sessions", load, retry_after_s=self._retry(self.kv_retry_s),
                              detail=f"{open_now} sessions are open (max_sessions); raise --max-sessions or "
                              "close one")

    def first_segments_due(self, sessions: list[str], now: float) -> tuple[dict[str, float], list[tuple[str, float]]]:
        """`sessions` split for the first-segment check: the directors whose first segment is due
        (`DutyTracker.first_segment_due`), with the seconds until it is not, and the others as
        (mode, duty). None due while the window is 0."""
        window = self.first_segment_window_s
        due = {} if window <= 0 else {sid: left for sid in sessions
                                      if (left := self.tracker.first_segment_due(sid, now, window)) is not None}
        return due, [(self.tracker.mode(sid), self.tracker.duty(sid, now)) for sid in sessions if sid not in due]

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
        model = self.group_model()
        prior = self.tracker.prior_of(request.mode)
        others = [sid for sid in self.tracker.sessions() if sid != request.session_id]
        if not others:
            # nothing open: plan as the start-up profile measured, also when a closed session's
            # last step reported in after its release (seen: a step slowed by a browser tab
            # closing on the same cores moved the model far enough to refuse a lone director for good)
            self.cost.settle()
        fits, need = model.alone(request.mode)
        if not fits and others:
            # the margin follows the engine's measured steps, and those ran beside the open
            # sessions (and whatever else shares the machine): not a verdict on one session alone
            n = len(others)
            return self._decision(False, "full", need, retry_after_s=self._retry(self.retry_max_s),
                                  detail=f"a {request.mode} session needs {need:.2f} s of engine time per media "
                                  f"second, more than the {model.budget:.2f} the engine's steps leave as measured "
                                  f"with {n} other session{'s' if n != 1 else ''} open"
                                  f"{_close_hint(n, 'it' if n == 1 else 'they')}")
        if not fits and need > model.budget + 1e-12 and (
                fade := self.cost.seconds_until_margin(1.0 - need, self.margin_prior, self.margin_floor)) is not None:
            # the configured margin would serve it: the margin measured in a slow spell refuses it,
            # and fades when nothing runs (CostModel.margin); retry once it has
            retry = self._retry(fade)
            return self._decision(False, "load", need, retry_after_s=retry,
                                  detail=f"one {request.mode} session needs {need:.2f} s of engine time per media "
                                  f"second and the engine's recent steps leave {model.budget:.2f} (they ran slower "
                                  f"than its start-up profile: margin {self.margin:.3f}, configured "
                                  f"{self.margin_prior:g}); with nothing running that fades: retry in {retry:.0f} s")
        if not fits:
            return self._decision(False, "never", need, detail=self._never_detail(request.mode, model, need))
        others_load, _ = self.load(now, exclude=request.session_id)
        load, _ = self.load(now, extra_duty=prior, exclude=request.session_id)
        window = self.tracker.window_s
        if (capped := self._at_max_sessions(request, load)) is not None:
            return capped
        group = [(self.tracker.mode(sid), self.tracker.duty(sid, now), self.objectives.tolerance(self.tracker.mode(sid)))
                 for sid in others]
        group.append((request.mode, prior, self.objectives.tolerance(request.mode)))
        if load > self.load_budget + 1e-12:
            wait = window * (load - self.load_budget) / others_load if others_load > 0 else window
            return self._refuse("load", load, wait, group, model,
                                f"predicted engine load {load:.3f} would exceed {self.load_budget:.3f} "
                                f"(1 - margin {self.margin}) with one more {request.mode} session")
        index, p_over, tolerance = worst_group_risk(group, model.served_share)
        if p_over > tolerance + 1e-12:
            # a person reads this on the page: an open session by its mode, not by an id that means nothing to them
            who = "the new session" if index == len(others) else f"an open {group[index][0]} session"
            miss = ("its frame deadlines" if group[index][0] == "world"
                    else f"its {self.objectives.director_start_delay_p95_s:g} s start delay or play with a stall")
            return self._refuse("burst", load, window * (p_over - tolerance) / p_over, group, model,
                                f"{who} would miss {miss} with the others demanding at once {p_over:.1%} of the "
                                f"time (objective allows {tolerance:.1%})")
        if (together := self._first_segments(request, others, model, load)) is not None:
            return together
        if not self._kv_fits(request):
            return self._decision(False, "kv", load, retry_after_s=self._retry(self.kv_retry_s),
                                  detail="the KV budget (device plus host offload) cannot hold another session")
        self._register(request)
        return self._decision(True, "ok", load)

    def _first_segments(self, request: AdmissionRequest, others: list[str], model: GroupModel,
                        load: float) -> Decision | None:
        """The risk check for an arrival burst: directors who opened in the last
        `first_segment_window_s` and have not finished their first segment direct it at about the
        same time as the newcomer starts (its first segment, or a world session's play), not
        independently at their duty. A refusal ("burst") when that group, the others demanding at
        their duties beside it, is not served within the newcomer's tolerance; Retry-After: until
        the first of them is no longer due. None when it passes (or the window is 0)."""
        together, rest = self.first_segments_due(others, request.now)
        if not together:
            return None
        p_over = first_segments_risk(request.mode, len(together), rest, model.served_share)
        tolerance = self.objectives.tolerance(request.mode)
        if p_over <= tolerance + 1e-12:
            return None
        n = len(together)
        often = "" if p_over >= 1.0 - 1e-9 else f" {p_over:.1%} of the time (objective allows {tolerance:.1%})"
        return self._decision(
            False, "burst", load, retry_after_s=self._retry(min(together.values())),
            detail=(f"1 director opened in the last {self.first_segment_window_s:g} s is starting its first segment"
                    if n == 1 else f"{n} directors opened in the last {self.first_segment_window_s:g} s are starting "
                    "their first segments")
            + f" and the engine cannot start {'both' if n == 1 else f'all {n + 1}'} within the "
            f"{self.objectives.director_start_delay_p95_s:g} s start delay{often}: retry in a few seconds, once "
            f"{'it has' if n == 1 else 'one of them has'} played its first segment")

    def _refuse(self, reason: str, load: float, wait: float, group: list[tuple[str, float, float]],
                model: GroupModel, detail: str) -> Decision:
        """A refusal by load or risk: Retry-After is `wait` (the others' duty falling), unless the risk
        check would refuse even with every open session idle (duty 0, the most waiting can bring):
        then the newcomer's own demand (a playing world session's prior is 1) puts an open session
        in a group the schedule cannot serve too often, only a close helps, and the refusal says so,
        as reason "full", with the longest Retry-After."""
        idle = [(mode, 0.0, tolerance) for mode, _, tolerance in group[:-1]] + group[-1:]
        _, p_idle, tolerance = worst_group_risk(idle, model.served_share)
        if p_idle <= tolerance + 1e-12:
            return self._decision(False, reason, load, retry_after_s=self._retry(wait), detail=detail)
        n = len(group) - 1
        return self._decision(False, "full", load, retry_after_s=self._retry(self.retry_max_s),
                              detail=detail + _close_hint(n, f"the other {n} session{'s' if n != 1 else ''}"))

    def _never_detail(self, mode: str, model: GroupModel, need: float) -> str:
        head = f"this server cannot serve one {mode} session within objective"
        if need > model.budget + 1e-12:
            per = "media second" if mode == "world" else (
                f"media second at the {model.director_rate:.2f}x real time a {self.objectives.director_start_delay_p95_s:g} s "
                "start delay needs")
            return (f"{head} (needs {need:.2f} s of engine time per {per}, has {model.budget:.2f}); "
                    "waiting will not help")
        a2p = model.input_to_frame_s(1)
        return (f"{head} (an input would show after {a2p:.2f} s, the objective is "
                f"{model.action_to_photon_s:.2f} s); waiting will not help")


def _close_hint(n: int, who: str) -> str:
    """The end of a refusal only a close can lift: `who` names the `n` open sessions."""
    return f"; waiting will not help while {who} {'stays' if n == 1 else 'stay'} open: retry once one closes"


def _binomial_pmf(n: int, p: float, k: int) -> float:
    """P(X = k) for X ~ Binomial(n, p)."""
    return math.comb(n, k) * p**k * (1.0 - p) ** (n - k)
