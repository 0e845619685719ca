"""What a person asks of admission first: which modes this start serves, for how many sessions,
and whether a session of each mode can be had now. Said once at start-up (the log), on the index
page and at the top of `/v1/capacity` (`serves_now`, `statement`), from the same checks the
policy admits by (`DutyPolicy.decide`: never, max_sessions, load, risk, first segments, kv)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from sessiond.admission.feasibility import GroupModel, first_segments_risk, worst_group_risk
from sessiond.admission.kvpool import KVPoolAdmission
from sessiond.admission.policy import PolicyBase
from sessiond.admission.start_verdict import Verdict

__all__ = ["LOOK_ANYWAY", "MODES", "AdmissionSummary", "serves_of", "summarize"]

MODES = ("world", "director")
LOOK_ANYWAY = "--policy kv"  # the one flag that admits by memory alone, objectives unchecked
_LIMIT = 64
_LABEL = {"world": "World", "director": "Director"}


@dataclass(frozen=True)
class AdmissionSummary:
    serves: dict[str, int]  # sessions of each mode alone this start serves within objective
    serves_now: dict[str, int]  # sessions of each mode that would be admitted now, beside those open
    cannot: dict[str, str] = field(default_factory=dict)  # mode -> why this start never serves it
    spread: tuple[float, float] | None = None  # the world cost rate's profile quartiles (engine s / media s)
    budget: float | None = None  # engine seconds per wall second admission plans with (1 - margin)
    policy: str = "duty"
    margin: dict[str, Any] | None = None  # the margin (1 - budget) and where it came from (CostModel.margin_snapshot)
    verdict: Verdict | None = None  # how the start settled its verdict against this machine's earlier starts
    cpu: tuple[int, int] | None = None  # a CPU engine's (torch threads, the machine's cores)
    # whether a World session and a Director session are served at the same time (None: not known, or
    # a mode is not served at all), and when not, why in words
    one_of_each: bool | None = None
    one_of_each_why: str = ""

    @property
    def statement(self) -> str:
        """One or two sentences for the start-up log and the index page."""
        if self.policy == "kv":
            return (f"This start admits by memory alone ({LOOK_ANYWAY}): up to {self.serves['world']} sessions, "
                    "with no check that they play within objective.")
        served = [m for m in MODES if self.serves[m] > 0]
        parts = [f"{_LABEL[m]} for {self.serves[m]} session{'s' if self.serves[m] != 1 else ''}" for m in served]
        head = f"This start serves {' and '.join(parts)}" if parts else "This start serves no session"
        if self.spread is not None and self.budget is not None:
            lo, hi = self.spread
            head += (f" (a World session costs {lo:.2f}-{hi:.2f} s of engine time per media second here, "
                     f"budget {self.budget:.2f})")
        if self.verdict is not None and not self.verdict.certain:
            head += f"; this verdict is {self.verdict.phrase()}"
        text = head + "."
        if self.one_of_each is False:
            text += (" A World session and a Director session are not served at the same time here "
                     f"({self.one_of_each_why}): one waits for the other to close.")
        for mode, why in self.cannot.items():
            text += (f" It cannot serve a {_LABEL[mode]} session within objective on this machine ({why}); "
                     f"to look anyway, start it with {LOOK_ANYWAY}.")
        if self.cannot and self.cpu is not None and self.cpu[0] < self.cpu[1]:
            threads, cores = self.cpu
            text += (f" The engine runs on {threads} of this machine's {cores} cores (the rest encode and send "
                     f"frames): --cpu-threads {cores} gives it more, at the cost of the streams' share.")
        return text

    def to_json(self) -> dict[str, Any]:
        return {"serves": dict(self.serves), "serves_now": dict(self.serves_now), "cannot": dict(self.cannot),
                "world_cost_spread": list(self.spread) if self.spread is not None else None,
                "budget": self.budget, "statement": self.statement, "margin": self.margin,
                "one_of_each": self.one_of_each,
                "start_verdict": self.verdict.to_json() if self.verdict is not None else None}


def serves_of(policy: PolicyBase) -> dict[str, int]:
    """Sessions of each mode alone the policy serves within objective, at most `max_sessions`."""
    cap = policy.max_sessions if policy.max_sessions is not None else _LIMIT
    return {m: min(cap, policy.mode_capacity(m)) for m in MODES}


def summarize(policy: Any, now: float, cpu: tuple[int, int] | None = None) -> AdmissionSummary | None:
    """The summary of a built policy (None for a policy handed in from outside); `cpu`: a CPU engine's
    (threads, the machine's cores), for the hint when a mode does not fit."""
    if isinstance(policy, KVPoolAdmission):
        open_now, room = policy.room()
        return AdmissionSummary(serves=dict.fromkeys(MODES, open_now + room), serves_now=dict.fromkeys(MODES, room),
                                policy="kv")
    if not isinstance(policy, PolicyBase):
        return None
    serves = serves_of(policy)
    cannot = {}
    one_of_each, one_of_each_why = None, ""
    if policy.cost.calibrated():
        model = policy.group_model()
        for mode in MODES:
            fits, need = model.alone(mode)
            if not fits:
                cannot[mode] = _why(policy, mode, need)
        if all(serves[m] > 0 for m in MODES):
            one_of_each = model.feasible(1, 1)
            if not one_of_each:
                one_of_each_why = _pair_refused_why(model)
    if policy.name == "duty":
        serves_now = {m: 0 if m in cannot else _headroom(policy, m, now) for m in MODES}
    else:  # the comparison policies admit by their own rule: what is left of their capacity
        open_now = len(policy.tracker.sessions())
        serves_now = {m: max(0, serves[m] - open_now) for m in MODES}
    spread = policy.cost.spread(1) if policy.cost.calibrated() else None
    margin = policy.cost.margin_snapshot(policy.margin_prior, policy.margin_floor)
    return AdmissionSummary(serves, serves_now, cannot, spread, policy.load_budget, policy.name, margin,
                            policy.start_verdict, cpu, one_of_each, one_of_each_why)


def _pair_refused_why(model: GroupModel) -> str:
    """Why one world session and one director are not served at once, each fitting alone: the
    engine time by rates, a world frame's action-to-photon time, or the world's lead (checked in
    the order `GroupModel.feasible` checks them)."""
    if model.need(1, 1) > model.budget + 1e-12:
        return "together they need more engine time than it has"
    if model.input_to_frame_s(2) > model.action_to_photon_s + 1e-12:
        return "a world frame would take longer than the action-to-photon objective from key to screen"
    return "a director's steps would hold the world's frames past their time"


def _why(policy: PolicyBase, mode: str, need: float) -> str:
    model = policy.group_model()
    if need > model.budget + 1e-12:
        return f"needs {need:.2f} s of engine time per media second, has {model.budget:.2f}"
    a2p = model.input_to_frame_s(1)
    return f"an input would show after {a2p:.2f} s, the objective is {model.action_to_photon_s:.2f} s"


def _headroom(policy: PolicyBase, mode: str, now: float) -> int:
    """The most newcomers of `mode` (each at its prior) the duty policy's checks admit beside the
    sessions open now: max_sessions, load, risk, first segments and KV, as `DutyPolicy.decide`
    applies them (newcomers arriving now arrive together: an arrival burst)."""
    tracker = policy.tracker
    others = tracker.sessions()
    if others and not policy.group_model().alone(mode)[0]:
        return 0  # as the policy measures now, beside the open sessions: `full`
    prior = tracker.prior_of(mode)
    tolerance = policy.objectives.tolerance(mode)
    group = [(tracker.mode(s), tracker.duty(s, now), policy.objectives.tolerance(tracker.mode(s))) for s in others]
    demanding = sum(tracker.demanding(s, now) for s in others)
    served = cache(policy.group_model().served_share)  # each group size is asked about many times
    # newcomers arriving now arrive together: with the directors whose first segment is due they
    # direct their first segments at once (`DutyPolicy._first_segments`)
    due, rest = policy.first_segments_due(others, now)

    def together_served(n: int) -> bool:
        if policy.first_segment_window_s <= 0 or (not due and (n == 1 or mode == "world")):
            return True
        fresh = len(due) + (n - 1 if mode == "director" else 0)
        beside = rest + ([(mode, prior)] * (n - 1) if mode == "world" else [])
        return first_segments_risk(mode, fresh, beside, served) <= tolerance + 1e-12

    def admits(n: int) -> bool:
        if policy.max_sessions is not None and len(others) + n > policy.max_sessions:
            return False
        load, _ = policy.load(now, extra_duty=n * prior)
        if load > policy.load_budget + 1e-12:
            return False
        _, p_over, tol = worst_group_risk([*group, *[(mode, prior, tolerance)] * n], served)
        if p_over > tol + 1e-12 or not together_served(n):
            return False
        return policy.kv is None or policy.kv.fits(len(others) + n, demanding + n)

    # every check only tightens as newcomers are added: the largest n admitted, by bisection
    lo, hi = 0, _LIMIT
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if admits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
