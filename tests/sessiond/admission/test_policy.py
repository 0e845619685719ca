"""Admission: the duty policy's boundary, its refusals, and the baseline policies."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

import pytest

from sessiond.admission import (
    AdmissionConfigError,
    AdmissionRequest,
    Decision,
    DutyPolicy,
    DutyPriors,
    DutyTracker,
    KvBudget,
    Objectives,
    OnePerGpuPolicy,
    OverrunAction,
    PolicyBase,
    make_policy,
)
from sessiond.admission.costmodel import MARGIN_HALF_LIFE_S, MARGIN_HOLD_S, CostModel
from tests.sessiond.admission.factories import known_cost, model_info


def _duty(cost: CostModel, *, director: float = 0.25, margin: float = 0.25, kv: KvBudget | None = None,
          kv_retry_s: float = 30.0, max_sessions: int | None = None,
          first_segment_window_s: float | None = None) -> DutyPolicy:
    tracker = DutyTracker(DutyPriors(director=director), window_s=60)
    return DutyPolicy(cost, tracker, margin=margin, max_batch=8, kv=kv, kv_retry_s=kv_retry_s,
                      max_sessions=max_sessions, first_segment_window_s=first_segment_window_s)


# sessions asked for one after another at one instant open together: their first segments are
# planned as one group (an arrival burst). The tests of the independent risk check turn that off.
_APART = 0.0


def _batched(chunk_seconds: float) -> CostModel:
    """A batch of any size up to 8 costs what one chunk costs: bursts never overload."""
    return known_cost(chunk_seconds, per_extra_session=0.0)


# these tests check the load arithmetic; their 1 s chunks would otherwise meet the
# action-to-photon bound first (tested on its own below)
_LOOSE_A2P = Objectives(world_action_to_photon_p95_ms=10_000.0)


def _ask(policy: PolicyBase, sid: str, mode: str = "director", now: float = 0.0) -> Decision:
    return policy.decide(AdmissionRequest(sid, mode, "create", now))


def test_admission_rejects_exactly_at_the_boundary() -> None:
    # a chunk costs 0.5 GPU s per media s; a director at prior 0.25 adds 0.125; budget 1 - 0.25 = 0.75
    policy = _duty(_batched(0.5))
    decisions = [_ask(policy, f"d{i}") for i in range(7)]
    assert [d.admitted for d in decisions] == [True] * 6 + [False]
    assert decisions[5].predicted_load == 0.75
    assert decisions[6].predicted_load == 0.875
    assert decisions[6].reason == "load"
    assert policy.tracker.sessions() == [f"d{i}" for i in range(6)]


def test_a_release_makes_room_for_exactly_one_more() -> None:
    policy = _duty(_batched(0.5))
    for i in range(6):
        _ask(policy, f"d{i}")
    policy.release("d0", 0.0)
    assert _ask(policy, "n1").admitted
    assert not _ask(policy, "n2").admitted


def test_a_refusal_is_503_capacity_with_retry_after_from_the_model() -> None:
    policy = _duty(_batched(0.5))
    for i in range(6):
        _ask(policy, f"d{i}")
    refused = _ask(policy, "late")
    # the others' measured load (0.75) would have to fall by 0.125: 60 s x 0.125 / 0.75 = 10 s
    assert refused.retry_after_s == 10.0
    body = refused.error_body()
    assert body["error"]["code"] == "capacity"
    assert body["error"]["retry_after_s"] == 10.0
    assert "0.875 would exceed 0.750" in body["error"]["message"]


def test_measured_duty_below_the_prior_admits_more() -> None:
    policy = _duty(_batched(0.5))
    for i in range(6):
        _ask(policy, f"d{i}", now=0.0)
        policy.tracker.end(f"d{i}", 0.0)  # the daemon reports: not generating
    # a minute of watching: none of them directed anything, measured duty 0
    assert _ask(policy, "late", now=60.0).admitted


def test_sessions_the_daemon_never_reports_on_keep_counting_at_their_prior() -> None:
    policy = _duty(_batched(0.5))
    for i in range(6):
        _ask(policy, f"d{i}", now=0.0)
    assert not _ask(policy, "late", now=600.0).admitted


def test_directors_who_would_fall_behind_together_are_refused_when_bursts_are_likely() -> None:
    # no batching gain: two generating at once need 2 x 0.5 = 1.0 > 0.75. The mean load of two
    # directors at duty 0.25 is only 0.25, but the second one would share the GPU a quarter of the
    # time: more than the 5% of segments the p95 objective allows
    policy = _duty(known_cost(0.5))
    assert _ask(policy, "d1").admitted
    refused = _ask(policy, "d2")
    assert (refused.admitted, refused.reason) == (False, "full")  # the risk check refused; only a close helps
    assert refused.predicted_load == 0.25
    # d1 would share with the newcomer a quarter of the time whatever d1 itself does: the newcomer's
    # prior does not decay, so only a close helps, and the refusal says so with the longest retry
    assert refused.retry_after_s == 60.0
    assert "25.0% of the time (objective allows 5.0%); waiting will not help while the other 1 session " \
           "stays open" in refused.detail


def _director_admitted(margin: float) -> DutyPolicy:
    """No batching gain, 0.6 per media s: a world session (prior 1: it always demands while playing)
    and a director cannot generate together (0.6 x (1 + 5 / 5.4) = 1.16 > 1.0). Director "d" is in."""
    tracker = DutyTracker(DutyPriors(world_playing=1.0, director=0.3), window_s=60)
    policy = DutyPolicy(known_cost(0.6), tracker, margin=margin, max_batch=8, objectives=_LOOSE_A2P, retry_max_s=45.0)
    assert _ask(policy, "d", "director").admitted
    return policy


_CLOSE_HINT = "; waiting will not help while the other 1 session stays open: retry once one closes"


@pytest.mark.parametrize(("margin", "generating", "now", "reason", "detail"), [
    # idle a whole window, the director's duty is 0, yet the world newcomer is still refused: the
    # director would share with it every time it directs
    (0.0, False, 120.0, "full", "an open director session would miss its 1.5 s start delay or play with a stall with the others "
                                 "demanding at once 100.0% of the time (objective allows 5.0%)" + _CLOSE_HINT),
    # on a 0.9 budget while the director generates, load refuses first: once its duty has fallen the
    # risk check would still refuse (found by hand: "Try again in 14 s", then refused again). Load: the
    # world at 1.0 x 0.6 plus the director at duty (0.3 x 30 + 1.0 x 30) / 60 = 0.65 x 0.6
    (0.1, True, 30.0, "full", "predicted engine load 0.990 would exceed 0.900 (1 - margin 0.1) with one more world "
                              "session" + _CLOSE_HINT),
])
def test_a_refusal_that_only_a_close_can_lift_says_so_and_asks_for_the_longest_retry(
        margin: float, generating: bool, now: float, reason: str, detail: str) -> None:
    policy = _director_admitted(margin)
    (policy.tracker.begin if generating else policy.tracker.end)("d", 0.0)
    refused = _ask(policy, "w", "world", now=now)
    assert (refused.admitted, refused.reason, refused.retry_after_s, refused.detail) == (False, reason, 45.0, detail)
    assert refused.error_body()["error"]["retry_after_s"] == 45.0
    policy.release("d", now + 1.0)
    assert _ask(policy, "w", "world", now=now + 1.0).admitted


def test_a_burst_refusal_that_waiting_can_lift_keeps_the_wait_from_the_model() -> None:
    # two directors at prior 0.04, no batching gain. d1 has generated for all of its 30 s: duty
    # (0.04 x 30 + 1.0 x 30) / 60 = 0.52, so the newcomer would share with it 52% of the time. That
    # falls as d1's busy half-minute leaves the window, so waiting helps: the wait from the model,
    # 60 s x (0.52 - 0.05) / 0.52, and no close hint
    policy = _duty(known_cost(0.5), director=0.04)
    assert _ask(policy, "d1").admitted
    policy.tracker.begin("d1", 0.0)
    refused = _ask(policy, "d2", now=30.0)
    assert (refused.admitted, refused.reason) == (False, "burst")
    assert refused.detail == ("the new session would miss its 1.5 s start delay or play with a stall with the others "
                              "demanding at once 52.0% of the time (objective allows 5.0%)")
    assert refused.retry_after_s == 54.231


def test_rare_bursts_are_tolerated_up_to_the_objective() -> None:
    policy = _duty(known_cost(0.5), director=0.04, first_segment_window_s=_APART)
    assert _ask(policy, "d1").admitted
    assert _ask(policy, "d2").admitted  # the other demands 4% of the time <= 5%
    assert _ask(policy, "d3").reason == "burst"  # one of two others: 1 - 0.96^2 = 7.8% > 5%


def test_a_session_that_cannot_fit_even_alone_is_refused_for_good_without_retry_after() -> None:
    # one director alone needs 0.9 x 5 / 5.4 (the rate a 1.5 s start delay allows with 1 s chunks
    # and 0.1 s jitter) = 0.833 > 0.75: waiting cannot help, so no Retry-After
    policy = _duty(known_cost(0.9))
    refused = _ask(policy, "d1")
    assert (refused.admitted, refused.reason, refused.retry_after_s) == (False, "never", None)
    assert refused.detail.startswith("this server cannot serve one director session within objective (needs 0.83 s "
                                     "of engine time per media second")
    assert "has 0.75" in refused.detail
    assert "retry_after_s" not in refused.error_body()["error"]
    world = _ask(policy, "w1", "world")
    assert (world.reason, world.retry_after_s) == ("never", None)
    assert world.detail.startswith("this server cannot serve one world session within objective (needs 0.90 s of "
                                   "engine time per media second, has 0.75)")
    assert policy.tracker.sessions() == []


def test_a_session_that_does_not_fit_alone_beside_open_ones_is_not_refused_for_good() -> None:
    # the steps ran 2.4x their profile while a session was open (they shared the machine): the
    # margin measured from them leaves less than one world session needs alone, but that is a
    # measurement beside the open session, so the refusal is a load refusal with the longest
    # Retry-After and the close hint, not "never"
    cost = known_cost(0.5)
    policy = _duty(cost)
    assert _ask(policy, "w1", "world").admitted
    for _ in range(400):  # each a chunk's worth (0.5 s predicted) taking 1.2 s: overrun +140%
        cost.note_step_wall(0.5, 0.5, 1.2)
    assert policy.margin == pytest.approx(50 / 450 * 0.25 + 400 / 450 * 1.4 / 2.4)
    refused = _ask(policy, "w2", "world")
    assert (refused.admitted, refused.reason, refused.retry_after_s) == (False, "full", 60.0)
    assert refused.detail == ("a world session needs 0.50 s of engine time per media second, more than the 0.45 "
                              "the engine's steps leave as measured with 1 other session open; waiting will not "
                              "help while it stays open: retry once one closes")


def test_with_nothing_open_a_slow_spells_margin_refuses_for_a_while_not_for_good() -> None:
    # the margin measured in a slow spell leaves less than one world session needs; with nothing open
    # no step measures that the machine is quick again, so the spell fades (CostModel.margin) and the
    # refusal says when to retry instead of "never"
    now = [0.0]
    cost = known_cost(0.5, clock=lambda: now[0])
    policy = _duty(cost)
    for _ in range(400):  # each a chunk's worth (0.5 s predicted) taking 1.2 s: overrun +140%
        cost.note_step_wall(0.5, 0.5, 1.2)
    w, measured = 400 / 450, 1.4 / 2.4
    assert policy.margin == pytest.approx((1 - w) * 0.25 + w * measured)  # budget 0.45 < the 0.5 needed
    refused = _ask(policy, "w1", "world")
    # margin 0.5 once the weight has faded to (0.5 - 0.25) / (w (measured - 0.25)): after the 30 s hold,
    # log2 of its inverse half-lives of 60 s
    fade_s = MARGIN_HOLD_S + MARGIN_HALF_LIFE_S * math.log2(w * (measured - 0.25) / 0.25)
    assert (refused.admitted, refused.reason, refused.retry_after_s) == (False, "load", round(fade_s, 3))
    assert refused.detail == ("one world session needs 0.50 s of engine time per media second and the engine's "
                              "recent steps leave 0.45 (they ran slower than its start-up profile: margin 0.546, "
                              "configured 0.25); with nothing running that fades: retry in 45 s")
    now[0] = fade_s - 1.0
    assert _ask(policy, "w1", "world").reason == "load"
    now[0] = fade_s + 0.01
    assert _ask(policy, "w1", "world").admitted
    # where even the configured margin leaves too little, it is "never" as before
    slow = _duty(known_cost(0.9))
    assert _ask(slow, "w1", "world").reason == "never"


def test_online_corrections_do_not_move_what_admission_plans_with() -> None:
    # admission plans with the start-up profile, and its margin is the steps' measured overrun over
    # that profile: the corrected costs under that margin would count a slow machine twice
    cost = known_cost(0.5, clock=lambda: 100.0)  # no time passes: the corrections do not fade
    policy = _duty(cost)
    assert _ask(policy, "w1", "world").admitted
    for _ in range(100):  # the online correction, as the engine's steps report 0.9 s per 1 s chunk
        for item, share in (("denoise", 1 / 8), ("cache", 1 / 4), ("decode", 1 / 4)):
            cost.observe(item, 1, 0, 0.9 * share)
    assert cost.cost_rate(1) == pytest.approx(0.9)
    assert policy.rate(1) == pytest.approx(0.5)
    assert policy.load(0.0) == (pytest.approx(0.5), 1.0)


def test_a_session_that_fits_alone_is_admitted_at_the_boundary() -> None:
    # 0.81 x 5 / 5.4 = 0.75: exactly the budget
    policy = _duty(known_cost(0.81))
    assert _ask(policy, "d1").admitted
    assert _ask(policy, "d2").reason == "full"  # the risk check: d1 would share with d2's prior, idle or not


def test_world_sessions_playing_together_are_checked_as_a_group() -> None:
    cost = known_cost(0.5, per_extra_session=0.25)  # a batch of k costs 0.5 (1 + 0.25 (k - 1))
    policy = DutyPolicy(cost, DutyTracker(DutyPriors(world_playing=1.0), window_s=60), margin=0.1, max_batch=8,
                        objectives=_LOOSE_A2P)
    assert [_ask(policy, f"w{i}", "world").admitted for i in range(5)] == [True] * 4 + [False]


def test_a_world_session_costs_its_full_rate() -> None:
    policy = _duty(known_cost(0.5))  # no batching gain
    assert _ask(policy, "w1", "world").admitted
    refused = _ask(policy, "w2", "world")
    assert refused.predicted_load == 1.0
    assert not refused.admitted


def test_batching_gain_lowers_the_predicted_load() -> None:
    # batch b costs (1 + 0.25 (b - 1)) x one chunk: four demanding sessions share a batch of 4
    cost = known_cost(0.5, per_extra_session=0.25)
    tracker = DutyTracker(DutyPriors(world_playing=1.0), window_s=60)
    policy = DutyPolicy(cost, tracker, margin=0.1, max_batch=8, objectives=_LOOSE_A2P)
    admitted = [_ask(policy, f"w{i}", "world").admitted for i in range(6)]
    # n worlds in a batch of n: 0.5 x (1 + 0.25 (n - 1)) GPU s per s <= 0.9  <=>  n <= 4.2
    # (without the batching gain only one would fit: 2 x 0.5 > 0.9)
    assert admitted == [True] * 4 + [False] * 2


def test_the_kv_budget_refuses_when_device_and_host_are_full() -> None:
    kv = KvBudget(device_bytes=2000, host_bytes=1000, per_session_bytes=1000)
    policy = _duty(known_cost(0.1), kv=kv, kv_retry_s=30.0)
    assert [_ask(policy, f"d{i}").admitted for i in range(3)] == [True, True, True]
    refused = _ask(policy, "d3")
    assert (refused.admitted, refused.reason, refused.retry_after_s) == (False, "kv", 30.0)


def test_only_demanding_sessions_must_fit_on_the_device() -> None:
    kv = KvBudget(device_bytes=2000, host_bytes=5000, per_session_bytes=1000)
    policy = _duty(known_cost(0.1), kv=kv)
    _ask(policy, "a")
    _ask(policy, "b")
    policy.tracker.begin("a", 0.0, media_s=5.0)
    policy.tracker.begin("b", 0.0, media_s=5.0)
    assert _ask(policy, "c", now=1.0).reason == "kv"
    assert _ask(policy, "c", now=6.0).admitted


def test_a_director_is_refused_when_its_start_delay_would_miss_the_objective_too_often() -> None:
    # no batching gain, chunks cost 0.6 s per media s. A world session (playing 10% of the time)
    # and a director (30%) together need 0.6 x (1 + 5 / 5.4) = 1.16 > 1.0 with a 1.5 s start
    # delay: the world session would share with the director 30% of its time (tolerance 1%), the
    # director with the world session 10% (tolerance 5%); the worst is named. With a 4 s start
    # delay the director may go at 5 / 7.9 of real time: 0.6 x (1 + 5 / 7.9) = 0.98, within
    tracker = DutyTracker(DutyPriors(world_playing=0.1, director=0.3), window_s=60)
    policy = DutyPolicy(known_cost(0.6), tracker, margin=0.0, max_batch=8, objectives=_LOOSE_A2P)
    assert _ask(policy, "w", "world").admitted
    refused = _ask(policy, "d", "director")
    assert (refused.admitted, refused.reason) == (False, "full")
    assert refused.detail == ("an open world session would miss its frame deadlines with the others demanding at once 30.0% of "
                              "the time (objective allows 1.0%); waiting will not help while the other 1 session "
                              "stays open: retry once one closes")
    relaxed = DutyPolicy(known_cost(0.6), DutyTracker(DutyPriors(world_playing=0.1, director=0.3), window_s=60),
                         margin=0.0, max_batch=8,
                         objectives=Objectives(director_start_delay_p95_s=4.0, world_action_to_photon_p95_ms=10_000.0))
    assert _ask(relaxed, "w", "world").admitted
    assert _ask(relaxed, "d", "director").admitted


def test_a_director_is_refused_beside_a_world_player_whose_chunks_its_steps_would_hold_past_their_lead() -> None:
    # 1 s chunks at 0.3 s (no batching gain), budget 0.85: by rates a world player and a director fit
    # (0.3 x (1 + 0.926) = 0.58). With a world lead of 0.6 s a director's step begun just before a
    # world chunk is ready (0.3 / 0.85 = 0.353 s as planned) and the chunk's own (0.353 s) end after
    # it is due: a director is refused while a world player plays, in words; with a 1 s lead both fit
    def policy(lead: float) -> DutyPolicy:
        return DutyPolicy(known_cost(0.3), DutyTracker(DutyPriors(director=0.3), window_s=60), margin=0.15,
                          max_batch=8, objectives=_LOOSE_A2P, world_lead_s=lead)

    tight = policy(0.6)
    assert _ask(tight, "w", "world").admitted
    refused = _ask(tight, "d", "director")
    assert (refused.admitted, refused.reason) == (False, "full")
    assert refused.detail.startswith("an open world session would miss its frame deadlines with the others demanding "
                                     "at once 30.0% of the time (objective allows 1.0%)")
    roomy = policy(1.0)
    assert [_ask(roomy, sid, mode).admitted for sid, mode in (("w", "world"), ("d", "director"))] == [True, True]
    with pytest.raises(AdmissionConfigError, match="world_lead_s"):
        policy(0.0)


def test_world_action_to_photon_bounds_a_world_group() -> None:
    # 1 s chunks at 0.2 s each (batch gain 0: a batch of k costs 0.2): an input waits up to a
    # chunk, then a step: 1.2 s alone. Objective 1.1 s: not even one; 1.3 s: one and more
    alone = DutyPolicy(_batched(0.2), DutyTracker(window_s=60), margin=0.1,
                       objectives=Objectives(world_action_to_photon_p95_ms=1100.0))
    refused = _ask(alone, "w1", "world")
    assert (refused.reason, refused.retry_after_s) == ("never", None)
    assert "an input would show after 1.20 s, the objective is 1.10 s" in refused.detail
    fits = DutyPolicy(_batched(0.2), DutyTracker(window_s=60), margin=0.1,
                      objectives=Objectives(world_action_to_photon_p95_ms=1300.0))
    assert [_ask(fits, f"w{i}", "world").admitted for i in range(3)] == [True, True, True]


def test_an_uncalibrated_model_refuses_with_a_short_retry() -> None:
    policy = _duty(CostModel(model_info()))
    refused = _ask(policy, "a")
    assert (refused.admitted, refused.reason, refused.retry_after_s) == (False, "uncalibrated", 1.0)


def test_sessions_over_their_prior_are_named_when_the_gpu_is_over_budget() -> None:
    policy = _duty(known_cost(0.5), director=0.25, margin=0.25)
    for i in range(6):  # admitted earlier, at their prior: 6 x 0.25 x 0.5 = 0.75, at the budget
        policy.tracker.add(f"d{i}", "director", 0.0)
    assert policy.overruns(0.0) == []
    for i in range(3):  # three directors generate non-stop for a minute
        policy.tracker.begin(f"d{i}", 0.0)
    actions = policy.overruns(60.0)
    assert actions[:3] == [OverrunAction(f"d{i}", "degrade_lead", 1.0, 0.25) for i in range(3)]
    assert [a.action for a in actions[3:]] == ["offload_idle"] * 3


def test_fifo_admits_past_the_load_budget_while_kv_holds() -> None:
    policy = make_policy("fifo", known_cost(0.5), DutyTracker(window_s=60), margin=0.25)
    assert all(_ask(policy, f"w{i}", "world").admitted for i in range(5))
    assert policy.scheduling == "fifo"
    assert policy.snapshot(0.0)["predicted_load"] == 2.5


def test_one_per_gpu_admits_one_and_names_the_place_in_line() -> None:
    policy = make_policy("one-per-gpu", known_cost(0.1), gpus=1)
    assert _ask(policy, "a").admitted
    refused = _ask(policy, "b")
    assert (refused.admitted, refused.reason, refused.queue_position) == (False, "queued", 1)
    assert policy.release("a", 5.0) == []  # nobody waited: the slot is simply free again
    assert _ask(policy, "c").admitted


async def test_one_per_gpu_hands_slots_to_waiters_in_fifo_order() -> None:
    policy = OnePerGpuPolicy(known_cost(0.1), DutyTracker(), gpus=1)
    _ask(policy, "a")
    b = asyncio.ensure_future(policy.wait(AdmissionRequest("b", "world", "create", 0.0), 5.0))
    c = asyncio.ensure_future(policy.wait(AdmissionRequest("c", "world", "create", 0.0), 5.0))
    await asyncio.sleep(0)
    late = _ask(policy, "d")
    assert (late.reason, late.queue_position) == ("queued", 3)
    handed = policy.release("a", 1.0)
    got_b = await b
    timed_out = await policy.wait(AdmissionRequest("e", "world", "create", 1.0), 0.01)
    waiting = policy.waiting()
    c.cancel()
    await asyncio.gather(c, return_exceptions=True)
    after_cancel = policy.waiting()
    assert (handed, got_b, timed_out) == (["b"], True, False)
    assert waiting == ["c"]
    assert after_cancel == []  # a waiter that goes away leaves the list


def test_an_unknown_policy_or_bad_margin_names_the_option() -> None:
    with pytest.raises(AdmissionConfigError, match=r"`policy`.*duty, one-per-gpu, fifo"):
        make_policy("lottery", known_cost(0.1))
    with pytest.raises(AdmissionConfigError, match="`margin`"):
        make_policy("duty", known_cost(0.1), margin=1.0)


def test_the_capacity_snapshot_says_what_admission_sees() -> None:
    policy = _duty(_batched(0.5))
    _ask(policy, "d0")
    snap = policy.snapshot(0.0)
    assert (snap["policy"], snap["sessions"], snap["load_budget"], snap["predicted_load"]) == ("duty", 1, 0.75, 0.125)
    assert snap["per_session"]["d0"]["prior"] == 0.25
    assert snap["decisions"] == {"ok": 1}


def test_the_capacity_of_one_mode_is_what_the_checks_admit_one_by_one() -> None:
    for cost, director in ((known_cost(0.5), 0.04), (_batched(0.5), 0.25), (known_cost(0.3), 0.3)):
        policy = _duty(cost, director=director, first_segment_window_s=_APART)
        admitted = 0
        while admitted < 64 and _ask(policy, f"d{admitted}").admitted:
            admitted += 1
        fresh = _duty(cost, director=director)
        assert fresh.mode_capacity("director") == admitted
    assert _duty(known_cost(0.5), director=0.04).mode_capacity("director") == 2
    assert _duty(known_cost(0.9)).mode_capacity("director") == 0  # not even one


_CAPPED_AT_2: dict[str, Callable[[], PolicyBase]] = {
    "duty": lambda: _duty(_batched(0.5), max_sessions=2),  # the load check alone would admit 6
    "fifo": lambda: make_policy("fifo", known_cost(0.5), DutyTracker(window_s=60), margin=0.25, max_sessions=2),
    "one-per-gpu": lambda: make_policy("one-per-gpu", known_cost(0.1), gpus=4, max_sessions=2),
}


@pytest.mark.parametrize("name", list(_CAPPED_AT_2))
def test_every_policy_refuses_a_new_session_at_max_sessions_until_one_closes(name: str) -> None:
    policy = _CAPPED_AT_2[name]()
    assert [_ask(policy, "a").admitted, _ask(policy, "b").admitted] == [True, True]
    refused = _ask(policy, "c")
    assert (refused.admitted, refused.policy, refused.reason, refused.retry_after_s) == (
        False, name, "max_sessions", 30.0)
    assert refused.detail == "2 sessions are open (max_sessions); raise --max-sessions or close one"
    assert refused.error_body()["error"] == {"code": "capacity", "retry_after_s": 30.0, "reason": "max_sessions",
                                             "message": refused.detail}
    resumed = policy.decide(AdmissionRequest("a", "director", "resume", 1.0))  # tracked: not new
    assert (resumed.admitted, resumed.reason) == (True, "ok")
    assert policy.release("a", 2.0) == []
    assert _ask(policy, "c", now=2.0).admitted
    assert sorted(policy.tracker.sessions()) == ["b", "c"]
    snap = policy.snapshot(2.0)
    assert (snap["max_sessions"], snap["sessions"], snap["decisions"]) == (2, 2, {"ok": 4, "max_sessions": 1})


def test_max_sessions_is_checked_before_the_load() -> None:
    policy = DutyPolicy(known_cost(0.5), DutyTracker(DutyPriors(world_playing=1.0), window_s=60), margin=0.25,
                        objectives=_LOOSE_A2P, max_sessions=1)
    assert _ask(policy, "w1", "world").admitted
    # a second world session is over the load budget too (2 x 0.5 > 0.75): the refusal names the limit
    refused = _ask(policy, "w2", "world")
    assert (refused.reason, refused.predicted_load, refused.retry_after_s) == ("max_sessions", 1.0, 30.0)


def test_one_per_gpu_with_every_slot_taken_still_queues_at_max_sessions() -> None:
    policy = make_policy("one-per-gpu", known_cost(0.1), gpus=1, max_sessions=1)
    assert _ask(policy, "a").admitted
    refused = _ask(policy, "b")
    assert (refused.reason, refused.queue_position) == ("queued", 1)


def test_without_max_sessions_the_limit_is_off_and_a_bad_one_names_the_option() -> None:
    policy = make_policy("fifo", known_cost(0.5), DutyTracker(window_s=60))
    assert all(_ask(policy, f"w{i}", "world").admitted for i in range(100))
    assert policy.snapshot(0.0)["max_sessions"] is None
    with pytest.raises(AdmissionConfigError, match="`max_sessions`: must be >= 1 when given, got 0"):
        make_policy("duty", known_cost(0.1), max_sessions=0)


def test_every_refusal_reason_a_policy_or_the_daemon_gives_is_one_the_protocol_documents() -> None:
    import re
    from pathlib import Path

    from protocols.http import CAPACITY_REASONS

    root = Path(__file__).resolve().parents[3] / "sessiond"
    given: set[str] = set()
    for path in [*root.joinpath("admission").glob("*.py"), root / "runtime" / "daemon.py", root / "runtime" / "directory.py"]:
        text = path.read_text()
        given |= set(re.findall(r'_decision\(False, "(\w+)"', text))
        given |= set(re.findall(r'_refuse\("(\w+)"', text))
        given |= set(re.findall(r', [\d.]+, "(\w+)"\)', text))  # Refused(CAPACITY, message, retry, reason)
    assert {"never", "full", "load", "burst", "kv", "queued", "uncalibrated", "max_sessions", "not_ready",
            "draining"} <= given
    assert given <= set(CAPACITY_REASONS)


def test_the_measured_director_prior_turns_a_fourth_director_away() -> None:
    # a chunk costs 0.3 at any batch (no batching gain): three directors generating at once fit the
    # 0.85 budget at the 0.926x real time their 1.5 s start delay needs, four do not
    def policy() -> DutyPolicy:
        return DutyPolicy(known_cost(0.3, per_extra_session=1.0), DutyTracker(DutyPriors(director=0.3), window_s=60),
                          margin=0.15, max_batch=8, first_segment_window_s=_APART)

    configured, measured = policy(), policy()
    # five directors served, watched 30 s each, demanding 3 .. 15 s: duties 0.1 .. 0.5, p90 0.46
    for i, media in enumerate((3.0, 6.0, 9.0, 12.0, 15.0)):
        measured.tracker.add(f"served{i}", "director", 100.0 * i)
        measured.tracker.begin(f"served{i}", 100.0 * i, media_s=media)
        measured.release(f"served{i}", 100.0 * i + 30.0)
    assert measured.tracker.prior_of("director") == pytest.approx(0.46)
    # at 0.3 the fourth is in a group of four (all three others demanding) 0.3^3 = 2.7% of the time
    assert [_ask(configured, f"d{i}", now=500.0).admitted for i in range(4)] == [True] * 4
    # at the measured 0.46, 0.46^3 = 9.7%, over the 5% risk
    decisions = [_ask(measured, f"d{i}", now=500.0) for i in range(4)]
    assert [d.admitted for d in decisions] == [True, True, True, False]
    assert decisions[3].reason == "burst"
    assert decisions[3].predicted_load == pytest.approx(4 * 0.46 * 0.3)
    assert "9.7% of the time" in decisions[3].detail
    assert configured.mode_capacity("director") == 4
    assert measured.mode_capacity("director") == 3
    said = measured.snapshot(500.0)
    assert said["director_prior"]["value"] == 0.46
    assert said["director_prior"]["source"] == "measured"
    assert said["priors"]["director"] == 0.3  # the configured prior, as before


def test_segments_that_start_a_stream_turn_a_third_director_away() -> None:
    # as above: 1 s chunks at 0.3, directors at the plain 0.926x (three at once: 0.833 of 0.85). A
    # segment that starts a stream makes its lead-in and first chunk within 1.4 s: 2 / 1.4 = 1.43x.
    # Two at once are not served when both start one (0.857), three when any does (0.984)
    def policy() -> DutyPolicy:
        return DutyPolicy(known_cost(0.3, per_extra_session=1.0), DutyTracker(DutyPriors(director=0.3), window_s=60),
                          margin=0.15, max_batch=8, first_segment_window_s=_APART)

    plain, measured = policy(), policy()
    measured.tracker.add("seen", "director", 0.0)
    for i in range(40):  # one segment in four starts a stream (a session's first, a cut)
        measured.tracker.begin("seen", float(i), media_s=1.0, starts_stream=i % 4 == 0)
    measured.tracker.remove("seen")
    assert measured.tracker.stream_starts.value == 0.2  # 10 of 40, the configured 0 worth 10 more
    model = measured.group_model()
    assert model.director_rate_lead == pytest.approx(2 / 1.4)
    assert [model.served_share(0, k) for k in (1, 2, 3, 4)] == pytest.approx([1.0, 1 - 0.2**2, 0.8**3, 0.0])
    assert [_ask(plain, f"d{i}", now=100.0).admitted for i in range(4)] == [True] * 4
    decisions = [_ask(measured, f"d{i}", now=100.0) for i in range(3)]
    assert [d.admitted for d in decisions] == [True, True, False]
    # the third: one other demanding (42%) x 4% not served, both (9%) x 48.8%: 6.1%
    assert decisions[2].reason == "burst"
    assert "6.1% of the time" in decisions[2].detail
    assert measured.mode_capacity("director") == 2
    assert measured.snapshot(100.0)["stream_starts"]["value"] == 0.2
