"""media=raw: one `frame` message per frame carrying the frame's metadata and its RGB bytes."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.messages import Frame
from transports.interface import OutChunk, OutFrame
from transports.raw import RawPacker


def _frame(idx: int, rgb: np.ndarray, disc: bool = False) -> OutFrame:
    return OutFrame(pts=idx * 5625, idx=idx, segment=2, action_seq=9, disc=disc, generation=0, rgb=rgb)


def test_each_frame_becomes_one_frame_message_with_its_metadata() -> None:
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    msgs = RawPacker().pack(OutChunk((_frame(4, rgb, disc=True), _frame(5, rgb))))
    assert msgs == [
        Frame(pts=22500, idx=4, w=3, h=2, fmt="rgb24", data=rgb.tobytes(), segment=2, action_seq=9, disc=True),
        Frame(pts=28125, idx=5, w=3, h=2, fmt="rgb24", data=rgb.tobytes(), segment=2, action_seq=9, disc=False),
    ]
    assert RawPacker().start() == []


def test_a_frame_that_is_not_rgb_is_refused() -> None:
    with pytest.raises(ValueError, match=r"expected \(height, width, 3\) uint8 RGB"):
        RawPacker().pack(OutChunk((_frame(0, np.zeros((2, 2), np.uint8)),)))
