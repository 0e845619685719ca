"""media=raw: one `frame` message per frame, uint8 RGB rows as they are (docs/protocol.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from protocols.messages import Frame
from transports.interface import OutChunk

__all__ = ["RawPacker"]


class RawPacker:
    """MediaPacker for raw frames. Stateless, so it may be shared."""

    media = "raw"

    def start(self) -> list[Any]:
        return []

    def pack(self, chunk: OutChunk) -> list[Any]:
        out = []
        for f in chunk.frames:
            rgb = np.ascontiguousarray(f.rgb, dtype=np.uint8)
            if rgb.ndim != 3 or rgb.shape[2] != 3:
                raise ValueError(f"frame {f.idx}: expected (height, width, 3) uint8 RGB, got shape {rgb.shape}")
            out.append(Frame(pts=f.pts, idx=f.idx, w=int(rgb.shape[1]), h=int(rgb.shape[0]), fmt="rgb24",
                             data=rgb.tobytes(), segment=f.segment, action_seq=f.action_seq, disc=f.disc,
                             players=f.players))
        return out
