"""The world playback clock."""

from __future__ import annotations

from sessiond.session.clock import PlaybackClock


def test_the_clock_says_how_far_ahead_of_playback_the_stream_is() -> None:
    clock = PlaybackClock(fps=16, now=10.0, total=0)
    assert clock.buffered(10.5, 16) == 8.0  # half a second played of one second generated
    assert clock.dry_at(16) == 11.0


def test_a_chunk_arriving_late_reanchors_the_clock_and_counts_a_miss() -> None:
    clock = PlaybackClock(fps=16, now=10.0, total=0)
    assert clock.arrive(now=10.2, before=8) is False  # frame 8 plays at 10.5
    assert clock.arrive(now=11.25, before=16) is True  # frame 16 was due at 11.0
    assert (clock.anchor_t, clock.anchor_i) == (11.25, 16)  # playback restarts from it, never skips ahead
