"""The media clock, on a fake clock."""

from __future__ import annotations

import itertools

import pytest

from protocols.timeline import pts_for
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


def _send_times(clock: MediaClock, now: FakeTime, arrivals: list[tuple[float, int]]) -> list[float]:
    """When each frame (arrival time, pts) leaves: the pacer takes it once it has arrived and the
    previous one has left, and waits the clock's delay."""
    out: list[float] = []
    for arrived, pts in arrivals:
        now.t = max(arrived, out[-1] if out else arrived)
        now.t += clock.delay(pts)
        out.append(now.t)
    return out


def test_a_slow_chunk_re_anchors_on_its_first_frame_and_its_frames_leave_one_interval_apart() -> None:
    now = FakeTime()
    clock = MediaClock(late_reset_s=0.0625 / 4, now=now)
    t0 = now.t
    first = [(t0, pts_for(i, 16)) for i in range(4)]
    slow = [(t0 + 0.29, pts_for(i, 16)) for i in range(4, 8)]  # due at t0 + 0.25: 40 ms late
    prompt = [(t0 + 0.30, pts_for(i, 16)) for i in range(8, 12)]
    sent = [t - t0 for t in _send_times(clock, now, first + slow + prompt)]
    assert sent == pytest.approx([0.0, 0.0625, 0.125, 0.1875,
                                  0.29, 0.3525, 0.415, 0.4775, 0.54, 0.6025, 0.665, 0.7275], abs=1e-9)
    assert clock.resets == 1


def test_no_two_frames_leave_closer_than_an_interval_minus_the_reset_threshold() -> None:
    now = FakeTime()
    clock = MediaClock(late_reset_s=0.0625 / 4, now=now)
    t0 = now.t
    arrivals = []
    for chunk in range(40):  # chunks 0..14 ms late, one 40 ms late every fifth
        late = 0.040 if chunk % 5 == 4 else 0.0035 * (chunk % 5)
        arrivals += [(t0 + 0.25 * chunk + late, pts_for(4 * chunk + i, 16)) for i in range(4)]
    sent = _send_times(clock, now, arrivals)
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert min(gaps) >= 0.0625 - 0.0625 / 4 - 1e-9


def test_a_stream_of_frames_paced_once_already_loses_an_offset_but_keeps_its_spacing() -> None:
    now = FakeTime()
    clock = MediaClock(late_reset_s=0.0625, now=now, catch_up_frames=4)
    interval = 0.0625
    assert clock.delay(pts_for(0, 16)) == 0.0  # anchored on a frame that came 0.1 s late (a joiner's newest)
    holds = []
    for i in range(1, 9):  # then every frame arrives one interval after the one before: each is held 0.1 s
        now.t = 100.0 + i * interval - 0.1
        holds.append(clock.delay(pts_for(i, 16)))
    assert holds[:3] == pytest.approx([0.1, 0.1, 0.1])
    assert holds[3] == pytest.approx(0.0)  # the fourth held frame shows the offset: the anchor moves by it
    assert holds[4:] == pytest.approx([0.0, 0.0, 0.0, 0.0])
    assert (clock.catch_ups, clock.resets) == (1, 0)


def test_a_burst_keeps_its_spacing_under_catch_up() -> None:
    now = FakeTime()
    clock = MediaClock(late_reset_s=0.0625, now=now, catch_up_frames=4)
    for chunk in range(3):  # four frames arrive together each quarter second: the first leaves at once
        now.t = 100.0 + chunk * 0.25
        delays = [clock.delay(pts_for(4 * chunk + k, 16)) for k in range(4)]
        assert delays == pytest.approx([0.0, 0.0625, 0.125, 0.1875])
    assert clock.catch_ups == 0


def test_without_catch_up_the_offset_stays_and_a_bad_window_is_refused() -> None:
    now = FakeTime()
    clock = MediaClock(late_reset_s=0.0625, now=now)
    clock.delay(pts_for(0, 16))
    for i in range(1, 9):
        now.t = 100.0 + i * 0.0625 - 0.1
        assert clock.delay(pts_for(i, 16)) == pytest.approx(0.1)
    assert clock.catch_ups == 0
    with pytest.raises(ValueError, match="catch_up_frames"):
        MediaClock(late_reset_s=0.0625, catch_up_frames=0)
