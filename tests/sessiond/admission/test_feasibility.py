"""Feasibility of a group under EDF, the start delay a director's player needs, and how often a
demanding session finds itself in a group the schedule cannot serve."""

from __future__ import annotations

import math

import pytest

from sessiond.admission.feasibility import (
    GroupModel,
    director_rate,
    joint_demand,
    required_rate,
    start_delay,
    worst_group_risk,
)


def test_the_numbers_demanding_at_once_are_a_two_type_poisson_binomial() -> None:
    assert joint_demand([("director", 0.5), ("director", 0.5)]) == {(0, 0): 0.25, (0, 1): 0.5, (0, 2): 0.25}
    dist = joint_demand([("world", 1.0), ("director", 0.0), ("director", 0.25)])
    assert dist == {(0, 0): 0.0, (1, 0): 0.75, (0, 1): 0.0, (1, 1): 0.25, (0, 2): 0.0, (1, 2): 0.0}
    assert joint_demand([]) == {(0, 0): 1.0}


def test_a_group_counts_the_session_itself_and_never_a_session_alone() -> None:
    # groups of 3 or more are infeasible; two others at 0.5: both demanding with it 25% of the time
    three = worst_group_risk([("director", 0.5, 0.05)] * 3, lambda w, m: w + m < 3)
    assert three[1] == 0.25
    two = worst_group_risk([("director", 0.5, 0.05)] * 3, lambda w, m: w + m < 2)
    assert two[1] == 0.75
    assert worst_group_risk([("director", 1.0, 0.05)], lambda w, m: False) == (0, 0.0, 0.05)


def test_the_worst_session_is_the_one_furthest_over_its_tolerance() -> None:
    group = [("world", 1.0, 0.01), ("director", 0.3, 0.05), ("director", 0.3, 0.05)]
    index, p, tolerance = worst_group_risk(group, lambda w, m: w + m < 3)
    assert index == 0  # the world session: both directors at once 9% of the time, tolerance 1%
    assert p == pytest.approx(0.09)
    assert tolerance == 0.01
    assert worst_group_risk([], lambda w, m: True) == (-1, 0.0, 1.0)


def test_the_start_delay_covers_the_first_chunk_or_the_last_one() -> None:
    # 5 s segments in 0.5 s chunks. Faster than real time: the first chunk decides (0.5 / 2)
    assert start_delay(5.0, 0.5, 2.0) == 0.25
    # at 0.8x: the last chunk is ready at 5 / 0.8 = 6.25 s and plays at d + 4.5 -> d = 1.75
    assert start_delay(5.0, 0.5, 0.8) == pytest.approx(1.75)
    assert start_delay(5.0, 0.5, 0.8, jitter_s=0.1) == pytest.approx(1.85)
    assert start_delay(5.0, 0.5, 0.0) == math.inf
    # a stream's short first chunk: half a second of lead-in at 0.8x makes every chunk 0.625 s later
    assert start_delay(5.0, 0.5, 0.8, lead_in_s=0.5) == pytest.approx(1.75 + 0.625)


def test_the_required_rate_inverts_the_start_delay() -> None:
    rate = required_rate(5.0, 0.5, 1.5, jitter_s=0.1)
    assert rate == pytest.approx(5.0 / 5.9)
    assert start_delay(5.0, 0.5, rate, jitter_s=0.1) == pytest.approx(1.5)
    assert required_rate(5.0, 0.5, 0.1, jitter_s=0.1) == math.inf  # no room left at all


def test_directors_share_what_world_sessions_leave() -> None:
    # two world sessions at 0.3 each take 0.6; two directors share 0.4 at 0.3 each: 0.4 / 0.6
    assert director_rate(2, 2, 0.3) == pytest.approx(0.4 / 0.6)
    assert director_rate(4, 1, 0.3) == 0.0


def _model(cost: float, *, budget: float = 0.85, director: float = 0.8, a2p: float = 10.0) -> GroupModel:
    return GroupModel(cost_rate=lambda k: cost, chunk_seconds=lambda k: cost * k, chunk_media_s=1.0,
                      budget=budget, director_rate=director, action_to_photon_s=a2p)


def test_a_group_is_feasible_exactly_up_to_the_budget() -> None:
    model = _model(0.25, budget=0.85, director=0.8)
    assert model.need(1, 2) == pytest.approx(0.25 * (1 + 1.6))  # 0.65
    assert model.feasible(1, 2)
    assert model.need(1, 3) == pytest.approx(0.85)
    assert model.feasible(1, 3)  # exactly at the budget
    assert not model.feasible(2, 3)  # 0.25 x (2 + 2.4) = 1.1
    assert model.alone("world") == (True, 0.25)


def test_world_groups_also_keep_action_to_photon_within_its_bound() -> None:
    # an input waits up to a chunk (1 s) and the step of k sessions takes 0.25 k: 1 + 0.5 <= 1.5
    model = _model(0.25, a2p=1.5)
    assert model.feasible(2, 0)
    assert not model.feasible(3, 0)  # 1 + 0.75 > 1.5
    assert model.feasible(0, 3)  # directors are not bound by it


def test_a_world_chunk_must_fit_behind_a_step_of_the_others_within_its_lead() -> None:
    # the demo on the 2-core AMD box: 0.25 s chunks, a world lead of one chunk, steps of 0.137 s
    # (one chunk) and 0.259 s (two) as planned. By rates a world player and a director fit (0.441 x
    # (1 + 0.813) = 0.80 of 0.85), chunk by chunk they do not: a director's step begun just before a
    # world chunk is ready holds it 0.137 s, and the chunk's own step ends 0.274 s after it was
    # ready, 0.024 s after it is due
    steps = {1: 0.137, 2: 0.259}
    model = GroupModel(cost_rate=lambda k: 0.441, chunk_seconds=lambda k: 0.116 * k, chunk_media_s=0.25,
                       budget=0.85, director_rate=0.813, action_to_photon_s=1.5, world_lead_s=0.25,
                       step_s=lambda b: steps[min(b, 2)])
    assert model.need(1, 1) == pytest.approx(0.441 * 1.813)
    assert model.world_blocked(1, 1) and not model.feasible(1, 1)
    assert model.feasible(1, 0) and not model.world_blocked(1, 0)  # alone: nothing holds it
    assert model.feasible(0, 2) and not model.world_blocked(0, 2)  # a director's chunks may be made 10 s ahead
    # world sessions alone fall into step (their chunks are ready only their lead ahead and batch):
    # the rates decide, here 2 x 0.441 = 0.88 > 0.85
    assert not model.world_blocked(2, 0) and not model.feasible(2, 0)
    assert model.served_share(1, 1) == 0.0
    # a lead of two chunks (0.5 s) holds it: 0.137 + 0.137 <= 0.5
    longer = GroupModel(cost_rate=lambda k: 0.441, chunk_seconds=lambda k: 0.116 * k, chunk_media_s=0.25,
                        budget=0.85, director_rate=0.813, action_to_photon_s=1.5, world_lead_s=0.5,
                        step_s=lambda b: steps[min(b, 2)])
    assert longer.feasible(1, 1)
    # Wan on the H100 (0.75 s chunks, a lead of two, steps 0.387 / 0.714 / 1.055 s): a world player
    # beside one, two or three directors fits within its 1.5 s lead (1.055 + 0.387 = 1.442)
    wan = {1: 0.387, 2: 0.714, 3: 1.055, 4: 1.395}
    h100 = GroupModel(cost_rate=lambda k: 0.2, chunk_seconds=lambda k: 0.3 * k, chunk_media_s=0.75, budget=0.79,
                      director_rate=0.885, action_to_photon_s=10.0, world_lead_s=1.5, step_s=lambda b: wan[min(b, 4)])
    assert [h100.world_blocked(1, m) for m in (1, 2, 3, 4)] == [False, False, False, True]


def test_a_segment_that_starts_a_stream_needs_the_faster_rate() -> None:
    # its lead-in chunk (0.5 s) comes first: (5 + 0.5) / (5 + 1.4 - 0.5)
    lead = required_rate(5.0, 0.5, 1.5, jitter_s=0.1, lead_in_s=0.5)
    assert lead == pytest.approx(5.5 / 5.9)
    assert start_delay(5.0, 0.5, lead, jitter_s=0.1, lead_in_s=0.5) == pytest.approx(1.5)
    # a long chunk: the lead-in and the first chunk both before playback, 2 x 0.75 / 1.4
    assert required_rate(5.0, 0.75, 1.5, jitter_s=0.1, lead_in_s=0.75) == pytest.approx(1.5 / 1.4)


def test_a_group_is_served_as_often_as_few_enough_of_its_directors_start_a_stream() -> None:
    # three directors at 0.8 x 0.35 = 0.84 of the 0.85 budget: none may start a stream (0.9 x 0.35)
    model = GroupModel(cost_rate=lambda k: 0.35, chunk_seconds=lambda k: 0.35 * k, chunk_media_s=1.0, budget=0.85,
                       director_rate=0.8, action_to_photon_s=10.0, director_rate_lead=0.9, lead_share=0.25)
    assert model.feasible(0, 3)
    assert model.served_share(0, 3) == pytest.approx(0.75**3)
    # two at 0.56: both may (0.63)
    assert model.served_share(0, 2) == 1.0
    assert model.served_share(0, 4) == 0.0  # not feasible at the plain rate
    # no stream starts measured: served whenever feasible, as before
    plain = GroupModel(cost_rate=lambda k: 0.35, chunk_seconds=lambda k: 0.35 * k, chunk_media_s=1.0, budget=0.85,
                       director_rate=0.8, action_to_photon_s=10.0, director_rate_lead=0.9, lead_share=0.0)
    assert plain.served_share(0, 3) == 1.0
    # the risk of one of three directors at 0.5: both others demanding (25%) x the group not served
    p = worst_group_risk([("director", 0.5, 0.05)] * 3, model.served_share)[1]
    assert p == pytest.approx(0.25 * (1 - 0.75**3))
