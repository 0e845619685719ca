"""The daemon's side of admission: each tick feeds the duty tracker from the session states,
counts the overrun actions and hands them to housekeeping; a session's duty for its status."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry

from sessiond.admission import AdmissionMetrics, DutyPolicy, DutyPriors, DutyTracker
from sessiond.admission_wiring import PolicyRuntime, demand_states
from sessiond.housekeeping import apply_overruns
from sessiond.lifecycle import SessionState
from tests.admission.factories import known_cost
from tests.sessiond._factory import make_session


def _runtime() -> tuple[PolicyRuntime, CollectorRegistry]:
    registry = CollectorRegistry()
    policy = DutyPolicy(known_cost(0.5), DutyTracker(DutyPriors(director=0.25), window_s=60), margin=0.25)
    return PolicyRuntime(policy, AdmissionMetrics(registry)), registry


async def test_demand_states_say_what_each_session_demands() -> None:
    world = make_session("s_w")
    world.attach("raw")
    director = make_session("s_d", mode="director")
    director.attach("raw")
    director.start_segment(re=1, seconds=2.5)
    director.settle()
    idle = make_session("s_i", mode="director")
    idle.set_state(SessionState.IDLE)
    states = demand_states({"s_w": world, "s_d": director, "s_i": idle})
    assert [(s.active, s.paused, s.segment, s.segment_media_s) for s in states.values()] == [
        (True, False, None, None), (True, False, 1, 2.5), (False, False, None, None)]


async def test_a_tick_feeds_the_tracker_and_counts_and_applies_the_overrun_actions() -> None:
    runtime, registry = _runtime()
    tracker = runtime.policy.tracker
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
    world.attach("raw")  # playing: demanding from this tick on
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
    runtime, _ = _runtime()
    runtime.policy.tracker.add("d0", "director", time.monotonic())
    duty = runtime.duty_of("d0")
    assert duty == {"duty": 0.25, "prior": 0.25, "measured": None, "demanding": False}
    assert runtime.duty_of("s_unknown") is None
