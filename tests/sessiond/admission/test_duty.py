"""Duty cycle per session over a sliding window, blended with the prior of its mode."""

from __future__ import annotations

import pytest

from loadtest.trace_tools.generator import DirectorParams, GameParams, mixed_trace
from loadtest.trace_tools.trace_duty import trace_stats
from sessiond.admission import AdmissionConfigError, DutyPriors, DutyTracker
from sessiond.admission.errors import UnknownSession


def test_a_new_session_has_the_prior_of_its_mode() -> None:
    tracker = DutyTracker(DutyPriors(world_playing=1.0, director=0.3), window_s=60)
    tracker.add("w", "world", 0.0)
    tracker.add("d", "director", 0.0)
    assert tracker.duty("w", 0.0) == 1.0
    assert tracker.duty("d", 0.0) == 0.3


def test_a_session_never_reported_on_keeps_its_prior() -> None:
    tracker = DutyTracker(DutyPriors(director=0.3), window_s=60)
    tracker.add("d", "director", 0.0)
    assert tracker.measured("d", 600.0) is None
    assert tracker.duty("d", 600.0) == 0.3


def test_the_measurement_replaces_the_prior_as_the_window_fills() -> None:
    tracker = DutyTracker(DutyPriors(director=0.3), window_s=60)
    tracker.add("d", "director", 0.0)
    tracker.begin("d", 0.0, media_s=5.0)
    # after 30 s: measured 5/30, half the window observed
    assert tracker.measured("d", 30.0) == pytest.approx(5 / 30)
    assert tracker.duty("d", 30.0) == pytest.approx(0.5 * 0.3 + 0.5 * (5 / 30))
    assert tracker.duty("d", 60.0) == pytest.approx(5 / 60)


def test_an_interrupt_cuts_a_segment_demand_short() -> None:
    tracker = DutyTracker(window_s=10)
    tracker.add("d", "director", 0.0)
    tracker.begin("d", 0.0, media_s=5.0)
    assert tracker.demanding("d", 1.0)
    tracker.end("d", 2.0)
    assert not tracker.demanding("d", 2.0)
    assert tracker.duty("d", 10.0) == pytest.approx(0.2)


def test_a_planned_segment_stops_demanding_at_its_media_end() -> None:
    tracker = DutyTracker(window_s=10)
    tracker.add("d", "director", 0.0)
    tracker.begin("d", 0.0, media_s=5.0)
    assert not tracker.demanding("d", 5.5)
    assert tracker.duty("d", 10.0) == pytest.approx(0.5)


def test_a_paused_world_session_has_the_paused_prior_and_stops_demanding() -> None:
    tracker = DutyTracker(DutyPriors(world_playing=1.0, world_paused=0.0), window_s=20)
    tracker.add("w", "world", 0.0)
    tracker.begin("w", 0.0)
    tracker.set_paused("w", True, 5.0)
    assert tracker.prior("w") == 0.0
    assert tracker.duty("w", 10.0) == pytest.approx((0.0 * 10 + 0.5 * 10) / 20)
    tracker.set_paused("w", False, 10.0)
    assert tracker.duty("w", 20.0) == pytest.approx(15 / 20)


def test_the_window_slides_and_forgets_old_demand() -> None:
    tracker = DutyTracker(window_s=10)
    tracker.add("w", "world", 0.0)
    tracker.begin("w", 0.0)
    tracker.end("w", 10.0)
    assert tracker.duty("w", 10.0) == pytest.approx(1.0)
    assert tracker.duty("w", 15.0) == pytest.approx(0.5)
    assert tracker.duty("w", 25.0) == pytest.approx(0.0)


def test_priors_refresh_from_a_trace() -> None:
    stats = trace_stats(mixed_trace(DirectorParams(sessions=4, seed=1), GameParams(sessions=4, seed=2)))
    priors = DutyPriors().refreshed(stats)
    assert priors.director == stats.mean_duty("director")
    assert priors.world_playing == stats.mean_duty("world")
    assert priors.world_paused == 0.0


def test_bad_settings_name_the_option() -> None:
    with pytest.raises(AdmissionConfigError, match="prior_director"):
        DutyPriors(director=1.5)
    with pytest.raises(AdmissionConfigError, match="duty_window_s"):
        DutyTracker(window_s=0)
    with pytest.raises(AdmissionConfigError, match="mode"):
        DutyTracker().add("x", "opera", 0.0)


def test_an_unknown_session_is_a_coded_error_naming_it() -> None:
    with pytest.raises(UnknownSession, match="'ghost' is not tracked"):
        DutyTracker().begin("ghost", 0.0)
