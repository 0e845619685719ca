"""The loopback aiortc clients' jitter buffer: a video frame goes to the decoder once all its
packets are in, up to the one with the marker bit (as a browser's receiver does); aiortc's own
buffer waits for the next frame's first packet."""

from __future__ import annotations

from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtp import RtpPacket

from transports.webrtc._jitter import MarkerJitterBuffer


def packet(seq: int, ts: int, marker: bool, data: bytes) -> RtpPacket:
    p = RtpPacket(payload_type=96, marker=int(marker), sequence_number=seq, timestamp=ts)
    p._data = data  # type: ignore[attr-defined]  # what aiortc's receiver sets: the depayloaded bytes
    return p


def test_a_one_packet_frame_with_its_marker_goes_out_at_once() -> None:
    buffer = MarkerJitterBuffer(128, is_video=True)
    pli, frame = buffer.add(packet(10, 5625, True, b"key"))
    assert pli is False and frame is not None
    assert (frame.data, frame.timestamp) == (b"key", 5625)
    # aiortc's own buffer keeps it until the next frame begins
    stock = JitterBuffer(128, is_video=True)
    assert stock.add(packet(10, 5625, True, b"key")) == (False, None)
    assert stock.add(packet(11, 11250, True, b"p1"))[1].data == b"key"  # type: ignore[union-attr]


def test_a_frame_of_three_packets_waits_for_all_of_them_in_any_order() -> None:
    buffer = MarkerJitterBuffer(128, is_video=True)
    assert buffer.add(packet(20, 900, False, b"a")) == (False, None)
    assert buffer.add(packet(22, 900, True, b"c")) == (False, None)  # the middle one is missing
    _, frame = buffer.add(packet(21, 900, False, b"b"))
    assert frame is not None and (frame.data, frame.timestamp) == (b"abc", 900)
    # the next frame starts clean: its packets only
    _, frame = buffer.add(packet(23, 6525, True, b"d"))
    assert frame is not None and (frame.data, frame.timestamp) == (b"d", 6525)


def test_frames_without_a_marker_go_out_as_aiortc_releases_them() -> None:
    buffer = MarkerJitterBuffer(128, is_video=True)
    assert buffer.add(packet(30, 100, False, b"x")) == (False, None)
    assert buffer.add(packet(31, 100, False, b"y")) == (False, None)
    _, frame = buffer.add(packet(32, 200, False, b"z"))  # the next frame began: the first is whole
    assert frame is not None and (frame.data, frame.timestamp) == (b"xy", 100)
    _, frame = buffer.add(packet(33, 200, True, b"w"))
    assert frame is not None and (frame.data, frame.timestamp) == (b"zw", 200)
