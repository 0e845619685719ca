"""fMP4 over WebSocket: what a Media Source Extensions client receives decodes exactly."""

from __future__ import annotations

import io

import av

from protocols.messages import Init, Media
from protocols.timeline import pts_for
from tests.transports._session import make_chunk
from transports.fmp4 import Fmp4Packer
from transports.interface import OutChunk

W, H, FPS = 160, 96, 16


def _demux(init: Init, media: list[Media]) -> list[av.VideoFrame]:
    blob = init.data + b"".join(m.data for m in media)
    with av.open(io.BytesIO(blob), mode="r", format="mp4") as container:
        stream = container.streams.video[0]
        return [frame for packet in container.demux(stream) for frame in packet.decode()]


def _stream_avcc(init: Init) -> bytes:
    with av.open(io.BytesIO(init.data), mode="r", format="mp4") as container:
        return bytes(container.streams.video[0].codec_context.extradata or b"")


def test_init_comes_first_and_carries_ftyp_moov() -> None:
    messages = Fmp4Packer(W, H, FPS).start()
    assert len(messages) == 1 and isinstance(messages[0], Init)
    assert messages[0].data[4:8] == b"ftyp"
    assert b"moov" in messages[0].data and b"avcC" in messages[0].data


def test_codec_string_matches_the_streams_avcc() -> None:
    packer = Fmp4Packer(W, H, FPS)
    init = packer.start()[0]
    avcc = _stream_avcc(init)
    assert avcc[0] == 1
    assert init.codec == f"avc1.{avcc[1]:02X}{avcc[2]:02X}{avcc[3]:02X}"
    assert init.codec.startswith("avc1.42C0")  # constrained baseline (x264 ultrafast)


def test_one_fragment_per_chunk_with_exact_metadata() -> None:
    packer = Fmp4Packer(W, H, FPS)
    packer.start()
    media = packer.pack(make_chunk(0, 4, FPS, W, H, segment=2, action_seq=7))
    assert [(m.idx, m.n, m.pts, m.dur, m.segment, m.action_seq, m.disc) for m in media] == [
        (0, 4, 0, 4 * 5625, 2, 7, False)
    ]
    assert media[0].data[4:8] == b"moof"


def test_every_frame_decodes_with_the_session_pts() -> None:
    packer = Fmp4Packer(W, H, FPS)
    init = packer.start()[0]
    media = packer.pack(make_chunk(0, 4, FPS, W, H)) + packer.pack(make_chunk(4, 4, FPS, W, H))
    frames = _demux(init, media)
    assert [f.pts for f in frames] == [pts_for(i, FPS) for i in range(8)]
    assert {str(f.time_base) for f in frames} == {"1/90000"}
    assert (frames[0].width, frames[0].height) == (W, H)


def test_durations_follow_the_timeline_at_a_fractional_rate() -> None:
    packer = Fmp4Packer(W, H, 7)
    packer.start()
    media = packer.pack(make_chunk(0, 3, 7, W, H))
    assert media[0].dur == pts_for(3, 7) - pts_for(0, 7) == 38571


def test_a_disc_starts_a_new_fragment_at_a_key_frame() -> None:
    packer = Fmp4Packer(W, H, FPS)
    init = packer.start()[0]
    first = packer.pack(make_chunk(0, 4, FPS, W, H))
    second = packer.pack(make_chunk(4, 4, FPS, W, H, disc_first=True))
    assert [(m.idx, m.n, m.disc) for m in second] == [(4, 4, True)]
    blob = init.data + b"".join(m.data for m in first + second)
    with av.open(io.BytesIO(blob), mode="r", format="mp4") as container:
        keys = [p.pts for p in container.demux(container.streams.video[0]) if p.is_keyframe]
    assert keys == [pts_for(0, FPS), pts_for(4, FPS)]


def test_a_new_segment_starts_at_a_key_frame_mid_chunk() -> None:
    packer = Fmp4Packer(W, H, FPS)
    packer.start()
    chunk = make_chunk(0, 2, FPS, W, H, segment=0).frames + make_chunk(2, 2, FPS, W, H, segment=1).frames
    media = packer.pack(OutChunk(chunk))
    assert [(m.idx, m.n, m.segment) for m in media] == [(0, 2, 0), (2, 2, 1)]


def test_a_client_joining_after_a_disc_decodes_from_its_key_frame() -> None:
    late = Fmp4Packer(W, H, FPS)  # a new connection: its own packer, joining at idx 8
    init = late.start()[0]
    media = late.pack(make_chunk(8, 4, FPS, W, H, disc_first=True))
    frames = _demux(init, media)
    assert [f.pts for f in frames] == [pts_for(i, FPS) for i in range(8, 12)]


def test_fragments_are_numbered_in_sequence() -> None:
    packer = Fmp4Packer(W, H, FPS)
    packer.start()
    media = packer.pack(make_chunk(0, 2, FPS, W, H)) + packer.pack(make_chunk(2, 2, FPS, W, H))
    # mfhd: size(4) 'mfhd'(4) version/flags(4) sequence(4), right after the moof header
    assert [int.from_bytes(m.data[20:24], "big") for m in media] == [1, 2]
