"""The media clock, on a fake clock."""

from __future__ import annotations

import pytest

from transports.webrtc._clock import MediaClock


class FakeTime:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_first_frame_leaves_at_once_and_the_next_at_its_pts() -> None:
    now = FakeTime()
    clock = MediaClock(late_reset_s=0.0625, now=now)
    assert clock.delay(0) == 0.0
    assert clock.delay(5625) == pytest.approx(0.0625)
    now.t += 0.05
    assert clock.delay(5625) == pytest.approx(0.0125)


def test_frames_arriving_together_are_spread_over_their_duration_not_burst() -> None:
    now = FakeTime()
    clock = MediaClock(late_reset_s=0.0625, now=now)
    delays = [clock.delay(pts) for pts in (0, 5625, 11250, 16875)]
    assert delays == pytest.approx([0.0, 0.0625, 0.125, 0.1875])


def test_a_slightly_late_frame_goes_now_without_moving_the_clock() -> None:
    now = FakeTime()
    clock = MediaClock(late_reset_s=0.0625, now=now)
    clock.delay(0)
    now.t += 0.0625 + 0.03
    assert clock.delay(5625) == 0.0
    assert clock.delay(11250) == pytest.approx(0.125 - 0.0925)
    assert clock.resets == 0


def test_a_late_frame_re_anchors_instead_of_rushing_the_rest() -> None:
    now = FakeTime()
    clock = MediaClock(late_reset_s=0.0625, now=now)
    clock.delay(0)
    now.t += 5.0  # a director session idle between segments
    assert clock.delay(5625) == 0.0
    assert clock.resets == 1
    assert clock.delay(11250) == pytest.approx(0.0625)


def test_a_nonpositive_reset_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="late_reset_s"):
        MediaClock(late_reset_s=0)
