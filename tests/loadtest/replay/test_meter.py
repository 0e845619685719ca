"""What one user saw, measured from what was sent and what arrived (times given, in seconds)."""

from __future__ import annotations

import pytest

from loadtest.replay.meter import SessionMeter, late_beyond_risk
from loadtest.replay.players import PlayerMeter
from sessiond.admission import Objectives

FPS = 16
FRAME = 90_000 // FPS  # 5625 ticks


def _meter(mode: str = "world", **objectives: float) -> SessionMeter:
    meter = SessionMeter("a", mode, Objectives(**objectives))
    meter.create_sent(0.0)
    meter.admitted(0.1, FPS)
    meter.connected(0.1)
    return meter


def _frames(meter: SessionMeter, first_idx: int, n: int, t0: float, *, segment: int = 0, action_seq: int = -1,
            disc_first: bool = False, spacing: float = 1 / FPS) -> None:
    for i in range(n):
        idx = first_idx + i
        meter.frame(idx * FRAME, idx, segment, action_seq, disc_first and i == 0, t0 + i * spacing)


def test_world_ttff_runs_from_create_to_the_first_frame() -> None:
    meter = _meter()
    _frames(meter, 0, 3, 0.5)
    assert meter.result.ttff_ms == [500.0]
    assert meter.result.frames_received == 3


def test_frames_on_time_are_not_misses_and_a_late_one_is() -> None:
    meter = _meter(playout_ms=100.0)
    _frames(meter, 0, 16, 1.0)  # one second of frames at 1x: all on time
    assert meter.result.deadline_misses == 0
    meter.frame(16 * FRAME, 16, 0, -1, False, 1.0 + 16 / FPS + 0.2)  # 200 ms late > 100 ms allowance
    assert meter.result.deadline_misses == 1


def test_after_a_stall_the_player_re_anchors_instead_of_counting_every_later_frame() -> None:
    meter = _meter(playout_ms=0.0)
    _frames(meter, 0, 8, 1.0)
    _frames(meter, 8, 8, 3.0)  # a 1.5 s stall, then real time again
    assert meter.result.deadline_misses == 1


def test_a_burst_arriving_ahead_of_playback_is_on_time() -> None:
    meter = _meter(playout_ms=0.0)
    _frames(meter, 0, 16, 1.0, spacing=0.001)
    assert meter.result.deadline_misses == 0


def test_action_to_photon_runs_to_the_first_frame_conditioned_on_it() -> None:
    meter = _meter()
    meter.action_sent(0, 1.00)
    meter.action_sent(1, 1.02)
    meter.action_sent(2, 1.04)
    meter.frame(0, 0, 0, -1, False, 1.05)
    meter.frame(FRAME, 1, 0, 1, False, 1.10)  # conditioned on seq 1: resolves 0 and 1
    meter.frame(2 * FRAME, 2, 0, 2, False, 1.30)
    assert meter.result.action_to_photon_ms == pytest.approx([100.0, 80.0, 260.0])


def test_an_action_sent_just_before_a_detach_is_unresolved_not_timed_over_the_absence() -> None:
    meter = _meter()
    meter.action_sent(0, 1.00)
    meter.frame(0, 0, 0, 0, False, 1.20)
    meter.action_sent(1, 44.60)
    meter.disconnected(44.62)  # detached 5 s: its frame, conditioned on seq 1, arrives after the attach
    meter.connected(49.90)
    meter.action_sent(2, 49.95)
    meter.frame(FRAME, 1, 0, 2, False, 50.20)
    assert meter.result.action_to_photon_ms == pytest.approx([200.0, 250.0])
    assert meter.result.actions_unresolved == 1


def test_interrupt_latency_runs_to_its_ack() -> None:
    meter = _meter()
    meter.interrupt_sent(7, 2.0)
    meter.ack(7, 10 * FRAME, 2.004)
    assert meter.result.interrupt_ms == pytest.approx([4.0])


def test_no_stale_frame_when_the_new_generation_starts_with_disc() -> None:
    meter = _meter()
    _frames(meter, 0, 10, 0.5)
    meter.interrupt_sent(1, 1.0)
    meter.ack(1, 9 * FRAME, 1.01)
    _frames(meter, 10, 5, 1.2, disc_first=True)
    assert meter.result.stale_frames_after_ack == 0


def test_old_generation_frames_after_the_ack_are_counted_stale() -> None:
    meter = _meter()
    _frames(meter, 0, 10, 0.5)
    meter.flush_sent(1, 1.0)
    meter.ack(1, 7 * FRAME, 1.01)  # nothing after pts of frame 7 may follow of the old generation
    meter.frame(8 * FRAME, 8, 0, -1, False, 1.02)
    meter.frame(9 * FRAME, 9, 0, -1, False, 1.03)
    _frames(meter, 10, 3, 1.2, disc_first=True)
    assert meter.result.stale_frames_after_ack == 2


def test_frames_up_to_the_ack_pts_may_still_arrive_after_it() -> None:
    meter = _meter()
    _frames(meter, 0, 4, 0.5)
    meter.interrupt_sent(1, 1.0)
    meter.ack(1, 5 * FRAME, 1.01)  # "was or will be sent": 4 and 5 are still on their way
    _frames(meter, 4, 2, 1.02)
    _frames(meter, 6, 2, 1.2, disc_first=True)
    assert meter.result.stale_frames_after_ack == 0


def test_a_timeline_that_skips_is_a_pts_error() -> None:
    meter = _meter()
    _frames(meter, 0, 3, 0.5)
    meter.frame(5 * FRAME, 5, 0, -1, False, 0.8)
    meter.frame(6 * FRAME + 1, 6, 0, -1, False, 0.9)
    assert meter.result.pts_errors == 2


def _director() -> SessionMeter:
    meter = SessionMeter("d", "director", Objectives(director_start_delay_p95_s=1.0))
    meter.create_sent(0.0)
    meter.admitted(0.05, FPS)
    meter.connected(0.05)
    return meter


def test_a_director_segment_measures_ttff_and_completion_from_its_direct() -> None:
    meter = _director()
    meter.direct_sent(3, 2.0, 1.0)
    meter.segment_start(1, 3, 1.3)
    _frames(meter, 0, 32, 1.4, segment=1, spacing=0.02)
    meter.segment_end(1, 3, "done", 2.1)
    meter.ended(5.0)
    r = meter.result
    assert r.ttff_ms == pytest.approx([400.0])
    assert r.segment_ms == pytest.approx([1020.0])  # to the last frame, at 1.4 + 31 x 0.02
    assert (r.segments_done, r.segments_late, r.frames_expected) == (1, 0, 32)
    assert r.within_objective(meter.objectives) is True


def test_a_segment_slower_than_its_media_time_is_late_but_within_objective_without_a_stall() -> None:
    # 1 s of media whose last frame arrives 1.35 s after the direct: late against its media time
    # (a figure), but the frames come faster than they play, so the player never stalls
    meter = _director()
    meter.direct_sent(1, 1.0, 0.0)
    meter.segment_start(1, 1, 0.5)
    _frames(meter, 0, 16, 0.6, segment=1, spacing=0.05)
    meter.segment_end(1, 1, "done", 1.5)
    meter.ended(2.0)
    assert meter.result.segments_late == 1
    assert (meter.result.stalls, meter.result.start_delay_ms) == (0, pytest.approx([600.0]))
    assert meter.result.within_objective(meter.objectives) is True


def test_a_player_starting_at_once_stalls_where_one_honouring_the_advice_does_not() -> None:
    # 32 frames (2 s of media) arriving in 4 chunks of 8, one chunk every 0.7 s (0.5 s of media
    # each): slower than real time. Started at the first frame, the player waits for chunks 2, 3
    # and 4 (0.2 s each); started 0.65 s later, as the server advised, it never waits
    def play(advice_s: float | None) -> SessionMeter:
        meter = _director()
        meter.direct_sent(1, 2.0, 0.0)
        meter.segment_start(1, 1, 0.3, 0, None if advice_s is None else 0.3 + advice_s)
        for c in range(4):
            _frames(meter, 8 * c, 8, 0.3 + 0.7 * c, segment=1, spacing=0.0)
        meter.segment_end(1, 1, "done", 2.5)
        meter.ended(3.0)
        return meter

    eager = play(None).result
    assert (eager.stalls, eager.stall_s) == (3, pytest.approx(0.6))
    # each stall on record: chunk c's first frame came 0.2 s after it was due, frame 8c of segment 1
    assert [(e["at_s"], e["late_ms"], e["segment"], e["frame_in_segment"]) for e in eager.stall_events] == [
        (1.0, 200.0, 1, 8), (1.7, 200.0, 1, 16), (2.4, 200.0, 1, 24)]
    assert eager.start_delay_ms == pytest.approx([300.0])
    assert eager.within_objective(Objectives(director_start_delay_p95_s=1.0)) is False
    patient = play(0.65).result
    assert (patient.stalls, patient.stall_s) == (0, 0.0)
    assert patient.start_delay_ms == pytest.approx([950.0])
    assert patient.within_objective(Objectives(director_start_delay_p95_s=1.0)) is True
    assert patient.within_objective(Objectives(director_start_delay_p95_s=0.8)) is False
    assert patient.to_json(Objectives())["stalls"] == {"count": 0, "seconds": 0.0}
    assert patient.to_json(Objectives())["stall_events"] == []
    # each start on record: the direct at 0 s, segment 1, started 0.95 s later (0.3 s + the advice)
    assert patient.to_json(Objectives())["start_events"] == [{"at_s": 0.0, "segment": 1, "start_delay_ms": 950.0}]
    assert eager.start_events == [{"at_s": 0.0, "segment": 1, "start_delay_ms": 300.0}]


def test_a_world_deadline_miss_is_a_stall_of_the_player() -> None:
    meter = _meter(playout_ms=0.0)
    _frames(meter, 0, 8, 0.0, spacing=0.0)  # anchored at 0: frame 8 is due at 0.5 s
    meter.frame(8 * FRAME, 8, 0, -1, False, 0.75)
    assert (meter.result.deadline_misses, meter.result.stalls) == (1, 1)
    assert meter.result.stall_s == pytest.approx(0.25)
    assert meter.result.stall_events == [{"at_s": 0.75, "late_ms": 250.0, "segment": None, "frame_in_segment": None}]


def test_a_direction_that_never_got_a_frame_is_unanswered() -> None:
    meter = _director()
    meter.direct_sent(1, 5.0, 0.0)
    meter.ended(4.0)
    assert meter.result.directs_unanswered == 1
    assert meter.result.within_objective(meter.objectives) is False


def test_an_interrupted_segment_expects_only_the_frames_it_sent() -> None:
    meter = _director()
    meter.direct_sent(1, 5.0, 0.0)
    meter.segment_start(1, 1, 0.2)
    _frames(meter, 0, 10, 0.3, segment=1)
    meter.interrupt_sent(2, 1.0)
    meter.ack(2, 9 * FRAME, 1.01)
    meter.segment_end(1, 1, "interrupted", 1.02)
    meter.frame(10 * FRAME, 10, 1, -1, False, 1.05)  # the interrupted segment goes on: stale
    meter.ended(2.0)
    r = meter.result
    assert (r.segments_interrupted, r.frames_expected, r.stale_frames_after_ack) == (1, 11, 1)


def test_world_frames_expected_follow_playing_time_not_paused_time() -> None:
    meter = _meter()
    _frames(meter, 0, 16, 1.0)
    meter.paused(2.0)
    meter.resumed(5.0)
    _frames(meter, 16, 16, 5.0)
    meter.ended(6.0)
    assert meter.result.frames_expected == 32  # 1.0-2.0 and 5.0-6.0 at 16 fps


def test_a_rejected_session_is_outside_the_objective_question() -> None:
    meter = SessionMeter("r", "world", Objectives())
    meter.rejected("capacity", 12.5, 0.3)
    assert meter.result.within_objective(meter.objectives) is None
    assert (meter.result.status, meter.result.retry_after_s) == ("rejected", 12.5)


def test_at_32_fps_the_servers_half_up_pts_are_no_errors_and_half_down_ones_are() -> None:
    meter = SessionMeter("a", "world", Objectives())
    meter.admitted(0.0, 32)
    meter.connected(0.0)
    for idx, pts in enumerate([0, 2813, 5625, 8438, 11250]):  # the server's: 2812.5 -> 2813, 8437.5 -> 8438
        meter.frame(pts, idx, 0, -1, False, 0.1 + idx / 32)
    assert meter.result.pts_errors == 0
    meter.frame(11250 + 2812, 5, 0, -1, False, 0.1 + 5 / 32)  # frame 5 rounded half to even: 14062
    assert meter.result.pts_errors == 1


def test_a_media_fragment_splits_into_frames_at_their_timeline_offsets() -> None:
    meter = SessionMeter("a", "world", Objectives())
    meter.admitted(0.0, 32)
    meter.connected(0.0)
    meter.media(2813, 1, 4, 0, -1, True, 0.2)  # frames 1..4: 2813, 5625, 8438, 11250
    meter.media(14063, 5, 3, 0, -1, False, 0.3)  # frames 5..7: 14063, 16875, 19688
    r = meter.result
    assert (r.frames_received, r.pts_errors) == (7, 0)
    meter.media(22500 + 1, 8, 2, 0, -1, False, 0.4)  # a fragment one tick off: both its frames are wrong
    assert (r.frames_received, r.pts_errors) == (9, 2)


def test_media_before_admission_is_an_error_naming_the_session() -> None:
    meter = SessionMeter("s7", "world", Objectives())
    with pytest.raises(RuntimeError, match="session s7: media arrived before admission"):
        meter.media(0, 0, 4, 0, -1, False, 0.0)


def test_each_director_segment_is_judged_once_and_missed_by_a_late_start_a_stall_or_no_answer() -> None:
    meter = _director()  # start delay bound 1.0 s
    meter.direct_sent(1, 1.0, 0.0)  # on time: playback starts 0.3 s after the direct, no stall
    meter.segment_start(1, 1, 0.2)
    _frames(meter, 0, 16, 0.3, segment=1)
    meter.segment_end(1, 1, "done", 1.3)
    meter.direct_sent(2, 1.0, 2.0)  # starts 1.5 s after its direct: over the bound
    meter.segment_start(2, 2, 3.4)
    _frames(meter, 16, 16, 3.5, segment=2)
    meter.segment_end(2, 2, "done", 4.5)
    meter.direct_sent(3, 1.0, 5.0)  # starts at once, then waits 0.5 s for its ninth frame: a stall
    meter.segment_start(3, 3, 5.1)
    _frames(meter, 32, 8, 5.2, segment=3)
    _frames(meter, 40, 8, 5.2 + 8 / FPS + 0.5, segment=3)
    meter.segment_end(3, 3, "done", 6.5)
    meter.direct_sent(4, 1.0, 7.0)  # never answered
    meter.ended(9.0)
    r = meter.result
    assert (r.segments_judged, r.segments_missed, r.stalls, r.directs_unanswered) == (4, 3, 1, 1)
    assert r.to_json(meter.objectives)["segments"] == {"done": 3, "interrupted": 0, "late": 3, "unanswered": 1,
                                                      "judged": 4, "missed": 3}


def test_a_director_is_judged_by_the_share_of_its_segments_the_stated_risk_allows() -> None:
    assert [late_beyond_risk(5, k, 0.05) for k in range(4)] == [False, False, True, True]
    assert late_beyond_risk(1, 1, 0.05) is True  # P(1 of 1) = 0.05: no more than the risk explains
    assert late_beyond_risk(40, 4, 0.05) is False and late_beyond_risk(40, 6, 0.05) is True
    result = _director().result
    result.start_delay_ms = [400.0, 1600.0, 500.0, 450.0, 700.0]  # one of five over 1 s: p95 over it
    assert result.within_objective(Objectives(director_start_delay_p95_s=1.0)) is True
    result.start_delay_ms[0] = 1200.0  # two of five: more than a 5% risk explains (P = 0.023)
    assert result.within_objective(Objectives(director_start_delay_p95_s=1.0)) is False


def test_a_seat_that_goes_away_drops_its_waiting_actions_as_unresolved() -> None:
    seat = PlayerMeter(0)
    seat.sent(0, 1.00)
    seat.frames(applied=0, n=4, t=1.25)
    seat.sent(1, 44.60)
    seat.away()  # detached: seq 1's frame comes only after it is back
    seat.sent(2, 49.95)
    seat.frames(applied=2, n=4, t=50.25)
    assert seat.action_to_photon_ms == pytest.approx([250.0, 300.0])
    assert seat.to_json()["actions_unresolved"] == 1
