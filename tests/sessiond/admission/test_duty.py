"""Duty cycle per session over a sliding window, blended with the prior of its mode."""

from __future__ import annotations

import pytest

from loadtest.trace_tools.generator import DirectorParams, GameParams, mixed_trace
from loadtest.trace_tools.trace_duty import trace_stats
from sessiond.admission import AdmissionConfigError, DutyPriors, DutyTracker
from sessiond.admission.duty import DirectorPrior, StreamStarts
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


def _served(tracker: DutyTracker, sid: str, *, at: float, media_s: float, closed_at: float) -> None:
    """A director that directs one segment of `media_s` when it is added and closes at `closed_at`."""
    tracker.add(sid, "director", at)
    tracker.begin(sid, at, media_s=media_s)
    tracker.remove(sid, closed_at)


def test_the_director_prior_is_a_high_quantile_of_the_directors_served() -> None:
    tracker = DutyTracker(DutyPriors(director=0.3), window_s=60)
    # directors watched 30 s each, demanding 3, 6, 9, 12, 15 s: duties 0.1 .. 0.5
    for i, media in enumerate((3.0, 6.0)):
        _served(tracker, f"d{i}", at=100.0 * i, media_s=media, closed_at=100.0 * i + 30.0)
    assert tracker.prior_of("director") == 0.3  # two seen: the configured prior stands
    assert tracker.director_prior.to_json()["source"] == "configured"
    _served(tracker, "d2", at=200.0, media_s=9.0, closed_at=230.0)
    # three seen: p90 of 0.1, 0.2, 0.3 = 0.2 + 0.8 x 0.1
    assert tracker.prior_of("director") == pytest.approx(0.28)
    for i, media in ((3, 12.0), (4, 15.0)):
        _served(tracker, f"d{i}", at=100.0 * i, media_s=media, closed_at=100.0 * i + 30.0)
    # five seen: p90 of 0.1, 0.2, 0.3, 0.4, 0.5 = 0.4 + 0.6 x 0.1
    assert tracker.prior_of("director") == pytest.approx(0.46)
    assert tracker.prior_of("world") == 1.0  # world priors stay configured
    said = tracker.director_prior.to_json()
    assert said["source"] == "measured"
    assert said["samples"] == 5
    assert said["value"] == 0.46
    assert said["samples_mean"] == pytest.approx(0.3)
    assert said["samples_max"] == pytest.approx(0.5)


def test_a_director_seen_too_briefly_or_without_a_time_leaves_no_sample() -> None:
    tracker = DutyTracker(DutyPriors(director=0.3), window_s=60)  # a sample needs 15 s watched
    _served(tracker, "brief", at=0.0, media_s=5.0, closed_at=14.0)
    tracker.add("untimed", "director", 0.0)
    tracker.begin("untimed", 0.0, media_s=5.0)
    tracker.remove("untimed")
    tracker.add("world", "world", 0.0)
    tracker.begin("world", 0.0)
    tracker.remove("world", 60.0)
    assert tracker.director_prior.to_json()["directors_seen"] == 0


def test_a_director_open_for_a_whole_window_gives_a_sample_per_window() -> None:
    tracker = DutyTracker(DutyPriors(director=0.3), window_s=60)
    tracker.add("d", "director", 0.0)
    tracker.begin("d", 0.0, media_s=5.0)
    tracker.begin("d", 30.0, media_s=5.0)
    tracker.begin("d", 61.0, media_s=5.0)  # a window watched: demand 4 + 5 s over [1, 61]
    assert tracker.director_prior.to_json()["directors_seen"] == 1
    assert tracker.director_prior.to_json()["samples_max"] == pytest.approx(9 / 60)
    tracker.remove("d", 75.0)  # 14 s since that sample: too short for another
    assert tracker.director_prior.to_json()["directors_seen"] == 1


def test_a_new_director_counts_at_the_measured_prior() -> None:
    tracker = DutyTracker(DutyPriors(director=0.3), window_s=60)
    for i, media in enumerate((3.0, 6.0, 9.0, 12.0, 15.0)):
        _served(tracker, f"d{i}", at=100.0 * i, media_s=media, closed_at=100.0 * i + 30.0)
    tracker.add("new", "director", 500.0)
    assert tracker.duty("new", 500.0) == pytest.approx(0.46)
    assert tracker.prior("new") == pytest.approx(0.46)
    # watched for half a window, demanding 5 s of 30: half its measurement, half the measured prior
    tracker.begin("new", 500.0, media_s=5.0)
    assert tracker.duty("new", 530.0) == pytest.approx(0.5 * 0.46 + 0.5 * (5 / 30))
    assert tracker.snapshot(530.0)["new"]["prior"] == pytest.approx(0.46)


def test_the_measured_prior_keeps_the_last_directors() -> None:
    prior = DirectorPrior(0.3, quantile=0.5, min_samples=2, keep=3)
    for duty in (0.9, 0.9, 0.1, 0.2, 0.3):
        prior.add(duty)
    assert prior.value == pytest.approx(0.2)  # the median of the last three
    prior.add(1.7)  # clamped to 1
    assert prior.to_json()["samples_max"] == 1.0


def test_bad_director_prior_settings_name_the_option() -> None:
    with pytest.raises(AdmissionConfigError, match="director_prior_quantile"):
        DirectorPrior(0.3, quantile=1.5)
    with pytest.raises(AdmissionConfigError, match="director_prior_samples"):
        DirectorPrior(0.3, min_samples=5, keep=4)
    with pytest.raises(AdmissionConfigError, match="director_prior_min_span_s"):
        DirectorPrior(0.3, min_span_s=0.0)


def test_the_share_of_segments_that_start_a_stream_is_measured_from_directors_segments() -> None:
    tracker = DutyTracker(window_s=60)  # the configured share 0 counts as 10 segments
    tracker.add("d", "director", 0.0)
    tracker.add("w", "world", 0.0)
    tracker.begin("w", 0.0)  # a world session's play is no segment
    assert tracker.stream_starts.value == 0.0
    tracker.begin("d", 0.0, media_s=5.0, starts_stream=True)  # its first segment: a lead-in chunk first
    assert tracker.stream_starts.value == pytest.approx(1 / 11)
    for t in (10.0, 20.0, 30.0, 40.0, 50.0):
        tracker.begin("d", t, media_s=5.0)
    tracker.begin("d", 60.0, media_s=5.0, starts_stream=True)  # after a cut
    assert tracker.stream_starts.value == pytest.approx(2 / 17)
    assert tracker.stream_starts.to_json() == {"value": 0.1176, "configured": 0.0, "prior_segments": 10,
                                               "segments": 7, "stream_starts": 2}
    measured = StreamStarts(0.0, prior_segments=0, keep=4)  # no prior: the share of the last four
    for starts in (True, True, False, True, False, False):
        measured.add(starts)
    assert measured.value == 0.25
