"""ISO BMFF boxes for fragmented MP4 with one H.264 video track (ISO/IEC 14496-12 and -15).

`init_segment` writes ftyp+moov (with mvex, so the file is fragmented); `fragment` writes one
moof+mdat holding consecutive samples. We write fragments ourselves rather than through
FFmpeg's mp4 muxer, which emits each fragment one frame late (measured on the 2-core box).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocols.timeline import PTS_HZ

__all__ = ["AvcConfig", "Sample", "avc_config", "codec_string", "fragment", "init_segment"]

TRACK_ID = 1
_KEY_FLAGS = 0x02000000  # sample_depends_on = 2 (no other sample), a sync sample
_DELTA_FLAGS = 0x01010000  # sample_depends_on = 1, sample_is_non_sync_sample = 1
_NAL_SPS = 7
_NAL_PPS = 8


@dataclass(frozen=True)
class AvcConfig:
    sps: bytes
    pps: bytes

    @property
    def profile(self) -> int:
        return self.sps[1]

    @property
    def compat(self) -> int:
        return self.sps[2]

    @property
    def level(self) -> int:
        return self.sps[3]


@dataclass(frozen=True)
class Sample:
    data: bytes  # one access unit, NAL units with 4-byte big-endian length prefixes
    duration: int  # 90 kHz
    keyframe: bool


def avc_config(nal_units: list[bytes]) -> AvcConfig:
    """The first SPS and PPS among these NAL units (raises ValueError naming what is missing)."""
    sps = next((u for u in nal_units if u[0] & 0x1F == _NAL_SPS), None)
    pps = next((u for u in nal_units if u[0] & 0x1F == _NAL_PPS), None)
    if sps is None or pps is None or len(sps) < 4:
        raise ValueError("H.264 parameter sets missing: need one SPS (type 7) and one PPS (type 8)")
    return AvcConfig(sps=sps, pps=pps)


def codec_string(config: AvcConfig) -> str:
    """The MSE/RFC 6381 codec string, e.g. avc1.42C01E, from the avcC's profile bytes."""
    return f"avc1.{config.profile:02X}{config.compat:02X}{config.level:02X}"


def _box(kind: bytes, *payload: bytes) -> bytes:
    body = b"".join(payload)
    return struct.pack(">I", 8 + len(body)) + kind + body


def _full_box(kind: bytes, version: int, flags: int, *payload: bytes) -> bytes:
    return _box(kind, struct.pack(">I", (version << 24) | flags), *payload)


_MATRIX = struct.pack(">9I", 0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x40000000)


def _avcc(config: AvcConfig) -> bytes:
    return _box(
        b"avcC",
        bytes([1, config.profile, config.compat, config.level, 0xFF, 0xE1]),
        struct.pack(">H", len(config.sps)),
        config.sps,
        b"\x01",
        struct.pack(">H", len(config.pps)),
        config.pps,
    )


def _stsd(config: AvcConfig, width: int, height: int) -> bytes:
    avc1 = _box(
        b"avc1",
        b"\x00" * 6 + struct.pack(">H", 1),  # reserved, data_reference_index
        b"\x00" * 16,  # pre_defined, reserved
        struct.pack(">HHIIIH", width, height, 0x00480000, 0x00480000, 0, 1),
        b"\x00" * 32,  # compressor name
        struct.pack(">Hh", 0x18, -1),  # depth, pre_defined
        _avcc(config),
    )
    return _full_box(b"stsd", 0, 0, struct.pack(">I", 1), avc1)


def _empty_table(kind: bytes, extra: bytes = b"") -> bytes:
    return _full_box(kind, 0, 0, extra, struct.pack(">I", 0))


def init_segment(config: AvcConfig, width: int, height: int) -> bytes:
    """ftyp + moov for one video track, timescale 90 kHz, duration unknown (live)."""
    ftyp = _box(b"ftyp", b"isom", struct.pack(">I", 0x200), b"isomiso6avc1mp41")
    mvhd = _full_box(
        b"mvhd", 0, 0,
        struct.pack(">IIII", 0, 0, PTS_HZ, 0),  # creation, modification, timescale, duration
        struct.pack(">IH", 0x00010000, 0x0100) + b"\x00" * 10,  # rate, volume, reserved
        _MATRIX, b"\x00" * 24, struct.pack(">I", TRACK_ID + 1),
    )
    tkhd = _full_box(
        b"tkhd", 0, 0x000003,  # enabled, in movie
        struct.pack(">IIIII", 0, 0, TRACK_ID, 0, 0),
        b"\x00" * 8, struct.pack(">hhhH", 0, 0, 0, 0),  # layer, group, volume, reserved
        _MATRIX, struct.pack(">II", width << 16, height << 16),
    )
    mdhd = _full_box(b"mdhd", 0, 0, struct.pack(">IIIIHH", 0, 0, PTS_HZ, 0, 0x55C4, 0))  # lang "und"
    hdlr = _full_box(b"hdlr", 0, 0, struct.pack(">I", 0), b"vide", b"\x00" * 12, b"video\x00")
    vmhd = _full_box(b"vmhd", 0, 1, b"\x00" * 8)
    dinf = _box(b"dinf", _full_box(b"dref", 0, 0, struct.pack(">I", 1), _full_box(b"url ", 0, 1)))
    stbl = _box(
        b"stbl", _stsd(config, width, height), _empty_table(b"stts"), _empty_table(b"stsc"),
        _full_box(b"stsz", 0, 0, struct.pack(">II", 0, 0)), _empty_table(b"stco"),
    )
    trak = _box(b"trak", tkhd, _box(b"mdia", mdhd, hdlr, _box(b"minf", vmhd, dinf, stbl)))
    trex = _full_box(b"trex", 0, 0, struct.pack(">IIIII", TRACK_ID, 1, 0, 0, 0))
    moov = _box(b"moov", mvhd, trak, _box(b"mvex", trex))
    return ftyp + moov


def fragment(sequence: int, base_time: int, samples: list[Sample]) -> bytes:
    """moof + mdat carrying `samples` in order, the first decoded at `base_time` (90 kHz)."""
    if not samples:
        raise ValueError("a fragment needs at least one sample")
    mfhd = _full_box(b"mfhd", 0, 0, struct.pack(">I", sequence))
    tfhd = _full_box(b"tfhd", 0, 0x020000, struct.pack(">I", TRACK_ID))  # default-base-is-moof
    tfdt = _full_box(b"tfdt", 1, 0, struct.pack(">Q", base_time))
    rows = b"".join(
        struct.pack(">III", s.duration, len(s.data), _KEY_FLAGS if s.keyframe else _DELTA_FLAGS)
        for s in samples
    )
    trun_size = 8 + 4 + 4 + 4 + len(rows)  # header, version/flags, sample_count, data_offset
    moof_size = 8 + len(mfhd) + 8 + len(tfhd) + len(tfdt) + trun_size
    trun = _full_box(b"trun", 0, 0x000701, struct.pack(">Ii", len(samples), moof_size + 8), rows)
    moof = _box(b"moof", mfhd, _box(b"traf", tfhd, tfdt, trun))
    assert len(moof) == moof_size
    return moof + _box(b"mdat", *(s.data for s in samples))
