"""Admission in an arrival burst: directors who open together direct their first segments together.

The risk check counts each open session as demanding, independently, at its duty. Directors who
opened a moment ago are not independent of a newcomer: each directs its first segment shortly
after it opens, so in a burst their first segments, each starting a stream, come together. The
duty policy plans those as one group (docs/admission.md, "Arrival bursts")."""

from __future__ import annotations

import pytest

from sessiond.admission import AdmissionRequest, Decision, DutyPolicy, DutyPriors, DutyTracker
from sessiond.admission.summary import summarize
from tests.sessiond.admission.factories import known_cost

# 1 s chunks at 0.3 engine s per media s, no batching gain, budget 0.85, a 1.5 s start delay
# (0.1 s playout): a director generates at 0.926x real time, one whose segment starts a stream
# at 1.43x. Two directors at the plain rate take 0.556 of 0.85; both starting a stream 0.858.


def _policy(window_s: float | None = None) -> DutyPolicy:
    return DutyPolicy(known_cost(0.3, per_extra_session=1.0), DutyTracker(DutyPriors(director=0.3), window_s=60),
                      margin=0.15, max_batch=8, first_segment_window_s=window_s)


def _ask(policy: DutyPolicy, sid: str, now: float) -> Decision:
    return policy.decide(AdmissionRequest(sid, "director", "create", now))


def test_a_director_opening_with_another_is_refused_when_their_two_first_segments_do_not_fit() -> None:
    policy = _policy()
    assert policy.first_segment_window_s == 10.0  # two segments of the daemon's 5 s
    assert _ask(policy, "d1", now=0.0).admitted
    refused = _ask(policy, "d2", now=0.5)
    assert (refused.admitted, refused.reason, refused.retry_after_s) == (False, "burst", 9.5)
    assert refused.detail == (
        "1 director opened in the last 10 s is starting its first segment and the engine cannot start both within "
        "the 1.5 s start delay: retry in a few seconds, once it has played its first segment")
    assert policy.tracker.sessions() == ["d1"]
    # the same two, apart: d1 opened 10 s before and never directed; the independent check admits
    assert _ask(policy, "d2", now=10.0).admitted


def test_a_director_in_its_first_segment_holds_a_newcomer_off_until_that_segment_ends() -> None:
    policy = _policy()
    assert _ask(policy, "d1", now=0.0).admitted
    policy.tracker.begin("d1", 2.0, media_s=5.0, starts_stream=True)
    refused = _ask(policy, "d2", now=3.0)
    assert (refused.reason, refused.retry_after_s) == ("burst", 4.0)  # d1's first segment ends at 7
    assert _ask(policy, "d2", now=7.5).admitted
    # a second segment is no first segment: d3 meets d1 (its second) and d2 (opened at 7.5)
    policy.tracker.begin("d1", 20.0, media_s=5.0)
    assert policy.tracker.first_segment_due("d1", 21.0, 10.0) is None
    assert policy.tracker.first_segment_due("d2", 16.0, 10.0) == pytest.approx(1.5)
    assert _ask(policy, "d3", now=16.0).reason == "burst"


def test_directors_opened_apart_are_admitted_as_the_independent_check_says() -> None:
    # three directors at the plain rate fit (0.833 of 0.85): opened 20 s apart, all three are
    # admitted; the same three within a second, only the first
    apart, burst = _policy(), _policy()
    assert [_ask(apart, f"d{i}", now=20.0 * i).admitted for i in range(3)] == [True, True, True]
    assert [_ask(burst, f"d{i}", now=0.3 * i).admitted for i in range(3)] == [True, False, False]
    assert _ask(burst, "d3", now=0.9).detail.startswith("1 director opened in the last 10 s")
    # the window at 0: the check is off, and the three at once are admitted as before
    assert [_ask(_policy(0.0), f"d{i}", now=0.0).admitted for i in range(3)] == [True, True, True]


def test_a_burst_the_engine_serves_is_admitted_whole() -> None:
    # a batch of any size costs one chunk (0.5): k directors starting a stream together need
    # 0.5 x 1.43 = 0.714 of the 0.75 budget whatever k; the load check stops the seventh
    policy = DutyPolicy(known_cost(0.5, per_extra_session=0.0), DutyTracker(DutyPriors(director=0.25), window_s=60),
                        margin=0.25, max_batch=8)
    decisions = [_ask(policy, f"d{i}", now=0.1 * i) for i in range(7)]
    assert [d.admitted for d in decisions] == [True] * 6 + [False]
    assert decisions[6].reason == "load"


def test_what_counts_as_a_first_segment_due() -> None:
    tracker = DutyTracker(window_s=60)
    tracker.add("d", "director", 0.0)
    tracker.add("w", "world", 0.0)
    assert tracker.first_segment_due("d", 4.0, 10.0) == 6.0  # not directed yet: until the window ends
    assert tracker.first_segment_due("d", 10.0, 10.0) is None
    assert tracker.first_segment_due("w", 1.0, 10.0) is None  # a world session plays from the start
    tracker.begin("d", 12.0, media_s=5.0)  # directed late: its first segment is due until it ends
    assert tracker.first_segment_due("d", 13.0, 10.0) == 4.0
    assert tracker.first_segment_due("d", 17.0, 10.0) is None
    tracker.add("p", "director", 0.0)
    tracker.set_paused("p", True, 1.0)  # detached: it directs nothing until it comes back
    assert tracker.first_segment_due("p", 2.0, 10.0) is None


def test_the_group_model_counts_directors_certain_to_start_a_stream() -> None:
    policy = _policy()
    policy.tracker.add("seen", "director", 0.0)
    for i in range(40):  # one segment in four starts a stream: the measured share 0.2
        policy.tracker.begin("seen", float(i), media_s=1.0, starts_stream=i % 4 == 0)
    model = policy.group_model()
    # two directors: room for one stream start. None certain: P(at most one of two) = 0.96; one
    # certain: the other must not start one, 0.8; both certain: 0
    assert [model.served_share(0, 2, starting=s) for s in (0, 1, 2)] == pytest.approx([0.96, 0.8, 0.0])
    assert model.served_share(0, 1, starting=1) == 1.0


def test_serves_now_counts_newcomers_arriving_together() -> None:
    policy = _policy()
    assert summarize(policy, 0.0).serves == {"world": 1, "director": 4}  # opened apart
    assert summarize(policy, 0.0).serves_now["director"] == 1  # two arriving now start together
    assert _ask(policy, "d1", now=0.0).admitted
    assert summarize(policy, 0.5).serves_now["director"] == 0  # d1's first segment is due
    assert summarize(policy, 10.5).serves_now["director"] == 1  # one more now; two more only apart
