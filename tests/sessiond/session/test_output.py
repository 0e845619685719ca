"""The output stream: idx/pts assigned at hand-out, generations, the `received` window."""

from __future__ import annotations

import numpy as np

from protocols.messages import Ack
from sessiond.session.output import MediaItem, OutputStream


def _item(generation: int, n: int = 8, chunk: int = 0, segment: int = 0, action_seq: int = -1) -> MediaItem:
    return MediaItem(generation, chunk, np.zeros((n, 2, 2, 3), np.uint8), segment, action_seq)


def _stream(sent: int = 0, disc: bool = False, window: int = 16) -> OutputStream:
    return OutputStream(fps=16, window_frames=window, frames_sent=sent, disc=disc)


def test_frames_get_consecutive_idx_and_their_pts_when_handed_out() -> None:
    out = _stream()
    out.push_media(_item(0, 5, chunk=0, action_seq=3))
    out.push_media(_item(0, 8, chunk=1, action_seq=4))
    a, b = out.take(), out.take()
    assert [f.idx for f in a.frames + b.frames] == list(range(13))
    assert [f.pts for f in a.frames[:3]] == [0, 5625, 11250]
    assert (a.frames[0].action_seq, b.frames[0].action_seq, a.frames[0].disc) == (3, 4, False)


def test_control_messages_go_before_queued_media() -> None:
    out = _stream()
    out.push_media(_item(0))
    out.push_control(Ack(re=1))
    assert out.take() == Ack(re=1)


def test_a_bump_drops_unsent_frames_and_rewinds_to_what_was_sent() -> None:
    out = _stream()
    out.push_media(_item(0, chunk=0))
    out.push_media(_item(0, chunk=1))
    chunk = out.take()
    for frame in chunk.frames[:3]:
        out.sent_one(frame)
    assert out.bump() == 5 + 8  # 5 handed but unsent, 8 queued
    assert (out.generation, out.next_idx, out.last_sent_pts()) == (1, 3, 2 * 5625)
    out.push_media(_item(1, chunk=1))
    after = out.take()
    assert [f.idx for f in after.frames[:2]] == [3, 4]
    assert after.frames[0].disc and not after.frames[1].disc
    assert after.frames[0].generation == 1


def test_nothing_sent_means_no_ack_pts() -> None:
    assert _stream().last_sent_pts() is None


def test_a_restored_stream_continues_at_its_position_with_disc() -> None:
    out = _stream(sent=45, disc=True)
    out.push_media(_item(0))
    first = out.take().frames[0]
    assert (first.idx, first.pts, first.disc) == (45, 253125, True)


def test_the_window_holds_frames_back_until_received() -> None:
    out = _stream(window=16)
    for chunk in range(4):
        out.push_media(_item(0, chunk=chunk))
    out.received(-1)  # the client asked for a window before any frame
    first, second = out.take(), out.take()
    assert out.take() is None  # 16 handed out, none acknowledged
    for frame in first.frames + second.frames:
        out.sent_one(frame)
    out.received(3)
    assert out.take() is None  # 12 unacknowledged + 8 > 16
    out.received(7)
    third = out.take()
    assert third.frames[0].idx == 16  # 8 unacknowledged + 8 <= 16
    out.received(99)
    assert out.acked == 23  # clamped to what was handed out


def test_sending_the_first_frame_of_a_chunk_reports_it_delivered() -> None:
    out = _stream()
    out.push_media(_item(0, n=2, chunk=7))
    out.push_media(_item(0, n=2, chunk=8))
    a, b = out.take(), out.take()
    assert out.sent_one(a.frames[0]) == [7]
    assert out.sent_one(a.frames[1]) == []
    assert out.sent_one(b.frames[0]) == [8]
    assert out.sent == 3


def test_an_ack_of_announced_but_unpaced_frames_opens_the_window() -> None:
    # WebRTC announces a chunk (`frames`) before its paced frames go out; the client acks it then
    out = _stream(window=16)
    out.received(-1)
    out.push_media(_item(0, 13, chunk=0))
    out.push_media(_item(0, 16, chunk=1))
    first = out.take()
    out.sent_one(first.frames[0])  # one frame paced out so far
    out.received(12)
    assert out.acked == 12
    second = out.take()
    assert [f.idx for f in second.frames] == list(range(13, 29))


def test_an_ack_beyond_what_was_handed_out_is_clamped() -> None:
    out = _stream()
    out.push_media(_item(0, 5))
    out.take()
    out.received(500)
    assert out.acked == 4
