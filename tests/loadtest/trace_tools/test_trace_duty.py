"""Duty cycle read from a trace: the source of refreshed admission priors."""

from __future__ import annotations

import pytest

from loadtest.trace_tools.generator import DirectorParams, director_trace
from loadtest.trace_tools.trace_duty import session_duty, trace_stats
from sessiond.traces import TraceEvent


def _ev(t: float, ev: str, **fields: object) -> TraceEvent:
    return TraceEvent(t, "a", ev, dict(fields))


def test_a_world_session_demands_while_playing_and_not_while_paused_or_detached() -> None:
    duty = session_duty([_ev(0, "create", mode="world"), _ev(10, "pause"), _ev(15, "resume"),
                         _ev(20, "detach"), _ev(30, "attach"), _ev(40, "close")])
    assert duty.lifetime_s == 40
    assert duty.demand_s == 25  # 0-10, 15-20, 30-40
    assert duty.duty == pytest.approx(0.625)


def test_a_director_segment_demands_its_media_duration_cut_short_by_an_interrupt() -> None:
    duty = session_duty([_ev(0, "create", mode="director"), _ev(2, "direct", prompt="p", seconds=5),
                         _ev(20, "direct", prompt="q"), _ev(22, "interrupt"), _ev(40, "close")])
    assert duty.demand_s == 7  # 5 s segment, then 2 s of a default 5 s segment
    assert duty.duty == pytest.approx(7 / 40)


def test_a_newer_direct_ends_the_previous_segment_demand() -> None:
    duty = session_duty([_ev(0, "create", mode="director"), _ev(1, "direct", prompt="p", seconds=5),
                         _ev(3, "direct", prompt="q", seconds=5), _ev(10, "close")])
    assert duty.demand_s == 7  # 1-3, then 3-8


def test_trace_stats_weigh_duty_by_lifetime_and_count_peak_concurrency() -> None:
    stats = trace_stats(director_trace(DirectorParams(sessions=8, seed=3)))
    assert stats.peak_concurrent == 8
    duty = stats.mean_duty("director")
    assert duty is not None
    assert 0.2 < duty < 0.45
    assert stats.mean_duty("world") is None
