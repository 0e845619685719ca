"""What the start says a person can have: the statement's sentences, exactly."""

from __future__ import annotations

from sessiond.admission import DutyPolicy, DutyPriors, DutyTracker, Objectives
from sessiond.admission.summary import AdmissionSummary, summarize
from tests.sessiond.admission.factories import known_cost

_WHY = "needs 1.44 s of engine time per media second, has 0.85"


def _nothing(cpu: tuple[int, int] | None) -> AdmissionSummary:
    return AdmissionSummary(serves={"world": 0, "director": 0}, serves_now={"world": 0, "director": 0},
                            cannot={"world": _WHY}, spread=(1.44, 1.48), budget=0.85, cpu=cpu)


def test_a_cpu_engine_on_fewer_threads_than_cores_is_told_how_to_give_it_more() -> None:
    assert _nothing((1, 2)).statement == (
        "This start serves no session (a World session costs 1.44-1.48 s of engine time per media second here, "
        f"budget 0.85). It cannot serve a World session within objective on this machine ({_WHY}); to look anyway, "
        "start it with --policy kv. The engine runs on 1 of this machine's 2 cores (the rest encode and send "
        "frames): --cpu-threads 2 gives it more, at the cost of the streams' share.")


def test_no_thread_hint_where_the_engine_has_every_core_or_is_not_on_a_cpu_or_every_mode_fits() -> None:
    plain = ("This start serves no session (a World session costs 1.44-1.48 s of engine time per media second "
             f"here, budget 0.85). It cannot serve a World session within objective on this machine ({_WHY}); "
             "to look anyway, start it with --policy kv.")
    assert _nothing((2, 2)).statement == plain
    assert _nothing(None).statement == plain
    fits = AdmissionSummary(serves={"world": 1, "director": 2}, serves_now={"world": 1, "director": 2},
                            spread=(0.5, 0.52), budget=0.85, cpu=(1, 2))
    assert fits.statement == ("This start serves World for 1 session and Director for 2 sessions (a World session "
                              "costs 0.50-0.52 s of engine time per media second here, budget 0.85).")


def test_a_start_that_serves_each_mode_but_not_one_of_each_at_once_says_so() -> None:
    # 1 s chunks at 0.3 s, budget 0.85: one world player, two directors, and by rates one of each
    # (0.3 x 1.93 = 0.58). With a world lead of 0.6 s a director's step (0.353 s as planned) and the
    # world chunk's own end after it is due: one of each is not served together; with 1 s it is
    def policy(lead: float) -> DutyPolicy:
        return DutyPolicy(known_cost(0.3), DutyTracker(DutyPriors(director=0.3), window_s=60), margin=0.15,
                          max_batch=8, objectives=Objectives(world_action_to_photon_p95_ms=10_000.0),
                          world_lead_s=lead)

    tight = summarize(policy(0.6), 0.0)
    assert tight is not None and tight.one_of_each is False and tight.to_json()["one_of_each"] is False
    assert tight.statement.endswith(
        "). A World session and a Director session are not served at the same time here (a director's steps would "
        "hold the world's frames past their time): one waits for the other to close.")
    roomy = summarize(policy(1.0), 0.0)
    assert roomy is not None and roomy.one_of_each is True and "same time" not in roomy.statement
    # one of each over the budget by rates (0.5 x (1 + 0.926) = 0.96 > 0.85), each alone within it
    costly = summarize(DutyPolicy(known_cost(0.5), DutyTracker(DutyPriors(director=0.3), window_s=60), margin=0.15,
                                  max_batch=8, objectives=Objectives(world_action_to_photon_p95_ms=10_000.0),
                                  world_lead_s=10.0), 0.0)
    assert costly is not None and costly.one_of_each is False
    assert costly.statement.endswith(
        "). A World session and a Director session are not served at the same time here (together they need more "
        "engine time than it has): one waits for the other to close.")


def test_one_of_each_refused_by_the_action_to_photon_objective_alone_is_told_that_reason() -> None:
    # 1 s chunks at 0.3 s, no batching gain: a world player alone sees a frame 1 + 0.3 s after its key,
    # beside a director 1 + 0.6 s, over a 1.5 s objective; by rates (0.58) and by the lead (10 s) both fit
    policy = DutyPolicy(known_cost(0.3), DutyTracker(DutyPriors(director=0.3), window_s=60), margin=0.15,
                        max_batch=8, objectives=Objectives(world_action_to_photon_p95_ms=1_500.0), world_lead_s=10.0)
    summary = summarize(policy, 0.0)
    assert summary is not None and summary.serves == {"world": 1, "director": 4} and summary.one_of_each is False
    assert summary.statement.endswith(
        "). A World session and a Director session are not served at the same time here (a world frame would take "
        "longer than the action-to-photon objective from key to screen): one waits for the other to close.")
