"""fMP4 over WebSocket (`?media=fmp4`): H.264 in ISO BMFF fragments for Media Source Extensions.

`start()` gives the `init` message (ftyp+moov and the exact MSE codec string read from the
avcC); `pack(chunk)` gives `media` messages (moof+mdat), one fragment per chunk, split where
a frame starts something new (a `disc`, a new segment, a new `action_seq`), so every fragment
is described exactly by one message's pts/dur/idx/n/segment/action_seq/disc. The first frame
of a connection, of every segment and after every `disc` is a key frame starting its
fragment: a client can join, flush or recover there. One packer per connection (its own
encoder, so each viewer starts at a key frame); `pack` is CPU work for an executor.
"""

from __future__ import annotations

import logging

from protocols.messages import Init, Media
from protocols.timeline import frame_ticks
from transports import _fmp4_boxes as boxes
from transports.encoding import EncoderSettings, H264Encoder, split_annexb
from transports.interface import OutChunk, OutFrame

__all__ = ["Fmp4Packer"]

logger = logging.getLogger(__name__)


def _needs_keyframe(prev: OutFrame | None, frame: OutFrame) -> bool:
    return prev is None or frame.disc or frame.segment != prev.segment


def _starts_fragment(prev: OutFrame | None, frame: OutFrame) -> bool:
    if prev is None or _needs_keyframe(prev, frame):
        return True
    return frame.action_seq != prev.action_seq or frame.players != prev.players or frame.idx != prev.idx + 1


def _length_prefixed(nal_units: list[bytes]) -> bytes:
    return b"".join(len(u).to_bytes(4, "big") + u for u in nal_units)


class Fmp4Packer:
    """MediaPacker for media="fmp4"."""

    media = "fmp4"

    def __init__(self, width: int, height: int, fps: int, crf: int = 23) -> None:
        self.width = width
        self.height = height
        self.fps = fps
        self._encoder = H264Encoder(EncoderSettings(width, height, fps, crf=crf, global_header=True))
        self._config = boxes.avc_config(split_annexb(self._encoder.extradata))
        self.codec = boxes.codec_string(self._config)
        self._sequence = 0
        self._last: OutFrame | None = None
        self.key_starts: list[bool] = []  # per fragment of the last `pack`: it begins with a key frame

    def force_keyframe(self) -> None:
        """The next frame packed is a key frame starting a new fragment (a spectator joins or skips
        there). Call between packs, never while one runs."""
        self._last = None

    def start(self) -> list[Init]:
        return [Init(codec=self.codec, data=boxes.init_segment(self._config, self.width, self.height))]

    def pack(self, chunk: OutChunk) -> list[Media]:
        groups: list[list[tuple[OutFrame, bool]]] = []
        for frame in chunk.frames:
            if not groups or _starts_fragment(self._last, frame):
                groups.append([])
            groups[-1].append((frame, _needs_keyframe(self._last, frame)))
            self._last = frame
        self.key_starts = [group[0][1] for group in groups]
        return [self._fragment(group) for group in groups]

    def _fragment(self, group: list[tuple[OutFrame, bool]]) -> Media:
        samples = []
        for frame, keyframe in group:
            encoded = self._encoder.encode(frame.rgb, frame.pts, keyframe=keyframe)
            units = [u for u in split_annexb(encoded.data) if u[0] & 0x1F not in (7, 8)]
            duration = frame_ticks(frame.idx, self.fps)
            samples.append(boxes.Sample(_length_prefixed(units), duration, encoded.keyframe))
        self._sequence += 1
        first = group[0][0]
        return Media(
            pts=first.pts,
            dur=sum(s.duration for s in samples),
            idx=first.idx,
            n=len(group),
            segment=first.segment,
            action_seq=first.action_seq,
            data=boxes.fragment(self._sequence, first.pts, samples),
            disc=first.disc,
            players=first.players,
        )
