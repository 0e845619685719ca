"""The daemon's side of admission: each tick feeds the duty tracker from the session states,
counts the overrun actions and applies them to the sessions; a session's duty for its status."""

from __future__ import annotations

import time
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from sessiond.admission import AdmissionMetrics, DutyPolicy, DutyPriors, DutyTracker
from sessiond.admission.runtime import AdmissionRuntime, demand_states
from sessiond.session import EngineOp, Op, connect
from sessiond.session.lifecycle import SessionState
from sessiond.session.overruns import apply_overruns
from tests.sessiond._factory import make_session
from tests.sessiond.admission.factories import known_cost


def _runtime() -> tuple[AdmissionRuntime, DutyPolicy, CollectorRegistry]:
    registry = CollectorRegistry()
    policy = DutyPolicy(known_cost(0.5), DutyTracker(DutyPriors(director=0.25), window_s=60), margin=0.25)
    return AdmissionRuntime(policy, measured=policy, metrics=AdmissionMetrics(registry)), policy, registry


async def test_demand_states_say_what_each_session_demands() -> None:
    world = make_session("s_w")
    connect(world, "raw")
    director = make_session("s_d", mode="director")
    connect(director, "raw")
    director.start_segment(re=1, seconds=2.5)
    director.settle()
    idle = make_session("s_i", mode="director")
    idle.set_state(SessionState.IDLE)
    states = demand_states({"s_w": world, "s_d": director, "s_i": idle})
    assert [(s.active, s.paused, s.segment, s.segment_media_s) for s in states.values()] == [
        (True, False, None, None), (True, False, 1, 2.5), (False, False, None, None)]


async def test_a_tick_feeds_the_tracker_and_counts_and_applies_the_overrun_actions() -> None:
    runtime, policy, registry = _runtime()
    tracker = policy.tracker
    now = time.monotonic()
    sessions = {}
    for i in range(6):  # six directors, idle now; three generated non-stop for the last minute
        sid = f"d{i}"
        sessions[sid] = make_session(sid, mode="director")
        sessions[sid].set_state(SessionState.IDLE)
        tracker.add(sid, "director", now - 60)
        if i < 3:
            tracker.begin(sid, now - 60)
    world = make_session("w")
    connect(world, "raw")  # playing: demanding from this tick on
    sessions["w"] = world
    tracker.add("w", "world", now)
    actions = runtime.refresh(sessions)
    assert tracker.demanding("w", time.monotonic()) and not tracker.demanding("d0", time.monotonic())
    assert [(a.session_id, a.action) for a in actions] == [(f"d{i}", "offload_idle") for i in range(6)]
    counted = registry.get_sample_value("sessiond_admission_overrun_actions_total", {"action": "offload_idle"})
    assert counted == 6.0
    apply_overruns(sessions, actions)
    assert [sessions[f"d{i}"].state for i in range(6)] == [SessionState.OFFLOADED] * 6
    assert world.state == SessionState.ACTIVE


def test_a_sessions_duty_for_its_status_or_none_when_untracked() -> None:
    runtime, policy, _ = _runtime()
    policy.tracker.add("d0", "director", time.monotonic())
    duty = runtime.duty_of("d0")
    assert duty == {"duty": 0.25, "prior": 0.25, "measured": None, "demanding": False}
    assert runtime.duty_of("s_unknown") is None


@dataclass(frozen=True)
class _Action:
    session_id: str
    action: str
    duty: float = 0.9
    prior: float = 0.5


def test_overrun_actions_cut_the_lead_and_offload_idle_state() -> None:
    world = make_session("s_w")
    connect(world, "raw")
    idle = make_session("s_i")
    idle.set_state(SessionState.IDLE)
    apply_overruns({"s_w": world, "s_i": idle},
                   [_Action("s_w", "degrade_lead"), _Action("s_i", "offload_idle"), _Action("s_gone", "degrade_lead")])
    assert world.lead_override == 1.0
    assert idle.state == SessionState.OFFLOADED and idle.ops == [EngineOp(Op.OFFLOAD)]


def test_a_degraded_lead_comes_back_once_admission_no_longer_names_the_session() -> None:
    world = make_session("s_w")
    connect(world, "raw")
    apply_overruns({"s_w": world}, [_Action("s_w", "degrade_lead")])
    assert world.lead_override == 1.0
    apply_overruns({"s_w": world}, [_Action("s_w", "degrade_lead")])
    assert world.lead_override == 1.0
    apply_overruns({"s_w": world}, [])
    assert world.lead_override is None
