"""Polled session states feed the duty tracker."""

from __future__ import annotations

import pytest

from sessiond.admission import DutyPriors, DutyTracker
from sessiond.admission.demand import DemandState, DemandSync


def _sync() -> tuple[DutyTracker, DemandSync]:
    tracker = DutyTracker(DutyPriors(world_playing=1.0, world_paused=0.0, director=0.3), window_s=10)
    return tracker, DemandSync(tracker)


def test_a_world_session_demands_while_active() -> None:
    tracker, sync = _sync()
    tracker.add("w", "world", 0.0)
    sync.update({"w": DemandState(active=True)}, 0.0)
    sync.update({"w": DemandState(active=False)}, 4.0)
    sync.update({"w": DemandState(active=True)}, 6.0)
    assert tracker.duty("w", 10.0) == pytest.approx(0.8)


def test_a_paused_world_session_takes_the_paused_prior() -> None:
    tracker, sync = _sync()
    tracker.add("w", "world", 0.0)
    sync.update({"w": DemandState(active=True)}, 0.0)
    sync.update({"w": DemandState(active=False, paused=True)}, 5.0)
    assert tracker.prior("w") == 0.0
    assert tracker.duty("w", 10.0) == pytest.approx(0.5)


def test_a_director_segment_counts_its_media_time_even_when_generated_faster() -> None:
    tracker, sync = _sync()
    tracker.add("d", "director", 0.0)
    sync.update({"d": DemandState(active=False)}, 0.0)
    sync.update({"d": DemandState(active=True, segment=1, segment_media_s=5.0)}, 1.0)
    sync.update({"d": DemandState(active=False)}, 2.5)  # generated in 1.5 s
    assert tracker.duty("d", 10.0) == pytest.approx(0.5)


def test_an_idle_director_is_measured_from_when_it_is_first_seen() -> None:
    tracker, sync = _sync()
    tracker.add("d", "director", 0.0)
    assert tracker.measured("d", 5.0) is None
    sync.update({"d": DemandState(active=False)}, 0.0)
    assert tracker.measured("d", 5.0) == 0.0


def test_untracked_and_vanished_sessions_are_ignored() -> None:
    tracker, sync = _sync()
    tracker.add("w", "world", 0.0)
    sync.update({"w": DemandState(active=True), "stranger": DemandState(active=True)}, 0.0)
    tracker.remove("w")
    sync.update({}, 1.0)
    assert tracker.sessions() == []


def test_a_director_segment_that_starts_a_stream_is_counted_as_one() -> None:
    tracker, sync = _sync()
    tracker.add("d", "director", 0.0)
    sync.update({"d": DemandState(active=True, segment=1, segment_media_s=5.0, starts_stream=True)}, 0.0)
    sync.update({"d": DemandState(active=True, segment=1, segment_media_s=5.0, starts_stream=True)}, 1.0)  # same
    sync.update({"d": DemandState(active=True, segment=2, segment_media_s=5.0)}, 6.0)
    said = tracker.stream_starts.to_json()
    assert (said["segments"], said["stream_starts"]) == (2, 1)
