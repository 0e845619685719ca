"""One H.264 encoder for one session stream: RGB frames with a 90 kHz pts in, Annex B access
units out.

libx264 with preset ultrafast and tune zerolatency on one thread (no lookahead, no B-frames:
one access unit out per frame in, decode order = presentation order). RGB -> YUV 4:2:0 goes
through one reused swscale context on one thread, the cheap path (measured on the 2-core box: the
conversion can cost as much as the encode). Not thread-safe: one caller at a time, which the
owners guarantee by awaiting each encode before the next (they run it in an executor).

`global_header=True` (fMP4) puts SPS/PPS in the codec's extradata, available before the
first frame (the init segment needs them); `False` (WebRTC) repeats SPS/PPS in-band before
every key frame, which is what a receiver joining at a key frame needs.
"""

from __future__ import annotations

import fractions
import logging
from dataclasses import dataclass

import av
import numpy as np
from av.video.frame import PictureType
from av.video.reformatter import Interpolation, VideoReformatter

from protocols.timeline import TIME_BASE

__all__ = ["EncodedFrame", "EncoderSettings", "H264Encoder", "split_annexb"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EncoderSettings:
    width: int
    height: int
    fps: int
    crf: int = 23  # x264 constant rate factor: lower is better quality and more bytes
    preset: str = "ultrafast"
    tune: str = "zerolatency"
    global_header: bool = False

    def __post_init__(self) -> None:
        if self.width <= 0 or self.height <= 0 or self.width % 2 or self.height % 2:
            raise ValueError(
                f"encoder size {self.width}x{self.height}: width and height must be positive and even"
            )
        if not 1 <= self.fps <= 240:
            raise ValueError(f"encoder fps {self.fps}: must be between 1 and 240")
        if not 0 <= self.crf <= 51:
            raise ValueError(f"encoder crf {self.crf}: must be between 0 and 51")


@dataclass(frozen=True)
class EncodedFrame:
    """One frame's H.264 access unit as the encoder made it: the packet (pts, dts and time base
    set: 90 kHz, the session pts) that RTP sends as it is, and its Annex B bytes for fMP4."""

    packet: av.Packet
    pts: int  # 90 kHz, the session pts of the frame
    keyframe: bool

    @property
    def data(self) -> bytes:
        """The access unit, Annex B (start codes)."""
        return bytes(self.packet)


def split_annexb(data: bytes) -> list[bytes]:
    """The NAL units of an Annex B byte stream, without their start codes."""
    units: list[bytes] = []
    i = data.find(b"\x00\x00\x01")
    while i >= 0:
        start = i + 3
        nxt = data.find(b"\x00\x00\x01", start)
        end = len(data) if nxt < 0 else nxt
        unit = data[start:end]
        if nxt >= 0 and unit.endswith(b"\x00"):
            unit = unit[:-1]  # the leading zero of a 4-byte start code
        if unit:
            units.append(unit)
        i = nxt
    return units


class H264Encoder:
    def __init__(self, settings: EncoderSettings) -> None:
        self.settings = settings
        ctx = av.CodecContext.create("libx264", "w")
        assert isinstance(ctx, av.VideoCodecContext)
        ctx.width = settings.width
        ctx.height = settings.height
        ctx.pix_fmt = "yuv420p"
        ctx.time_base = TIME_BASE
        ctx.framerate = fractions.Fraction(settings.fps, 1)
        ctx.thread_count = 1
        ctx.gop_size = 1 << 20  # key frames only when asked for (start, disc, new viewer)
        ctx.options = {
            "preset": settings.preset,
            "tune": settings.tune,
            "crf": str(settings.crf),
            "forced-idr": "1",
        }
        if settings.global_header:
            ctx.flags |= av.codec.context.Flags.global_header
        ctx.open()
        self._ctx = ctx
        self._reformatter = VideoReformatter()
        self._frames = 0

    @property
    def extradata(self) -> bytes:
        """SPS/PPS in Annex B (global_header mode); empty otherwise."""
        return bytes(self._ctx.extradata or b"")

    def encode(self, rgb: np.ndarray, pts: int, keyframe: bool = False) -> EncodedFrame:
        """Encode one frame; the first frame is always a key frame."""
        s = self.settings
        if rgb.dtype != np.uint8 or rgb.shape != (s.height, s.width, 3):
            raise ValueError(
                f"frame is {rgb.dtype} {tuple(rgb.shape)}; this stream encodes uint8 "
                f"({s.height}, {s.width}, 3) RGB"
            )
        src = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        yuv = self._reformatter.reformat(src, format="yuv420p", interpolation=Interpolation.POINT, threads=1)
        yuv.pts = pts
        yuv.time_base = TIME_BASE
        force = keyframe or self._frames == 0
        yuv.pict_type = PictureType.I if force else PictureType.NONE
        packets = self._ctx.encode(yuv)
        self._frames += 1
        if len(packets) != 1:
            raise RuntimeError(f"x264 returned {len(packets)} packets for one frame; expected 1 (zerolatency)")
        packet = packets[0]
        packet.pts = packet.dts = pts  # decode order = presentation order (no B-frames)
        packet.time_base = TIME_BASE
        return EncodedFrame(packet=packet, pts=pts, keyframe=bool(packet.is_keyframe))
