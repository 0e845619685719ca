"""A fake SessionPort for transport tests: real RGB frames on the real pts timeline, a script
of outputs, and a record of what the transport submitted and marked sent."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protocols.timeline import pts_for
from transports.interface import OutChunk, OutFrame


def rgb_frame(idx: int, width: int, height: int) -> np.ndarray:
    """A gradient with a bright square moving 8 px per frame: real, compressible content."""
    y, x = np.mgrid[0:height, 0:width]
    img = np.stack([(x * 255 // max(1, width - 1)), (y * 255 // max(1, height - 1)),
                    np.full_like(x, (idx * 9) % 256)], axis=-1).astype(np.uint8)
    left = (idx * 8) % max(1, width - 32)
    img[16:48, left:left + 32] = 255
    return img


def make_chunk(first_idx: int, n: int, fps: int, width: int, height: int, *, segment: int = 0,
               action_seq: int = -1, disc_first: bool = False, generation: int = 0) -> OutChunk:
    return OutChunk(tuple(
        OutFrame(pts=pts_for(i, fps), idx=i, segment=segment, action_seq=action_seq,
                 disc=disc_first and i == first_idx, generation=generation, rgb=rgb_frame(i, width, height))
        for i in range(first_idx, first_idx + n)
    ))


@dataclass
class FakePort:
    width: int = 160
    height: int = 96
    fps: int = 16
    session_id: str = "s-test"
    outputs: asyncio.Queue[Any] = field(default_factory=lambda: asyncio.Queue())
    submitted: list[Any] = field(default_factory=list)
    sent: list[OutFrame] = field(default_factory=list)
    sent_at: list[float] = field(default_factory=list)  # monotonic seconds
    gen: int = 0
    closed: bool = False

    def generation(self) -> int:
        return self.gen

    def submit(self, message: Any) -> None:
        self.submitted.append(message)

    async def next_output(self) -> Any:
        if self.closed:
            return None
        return await self.outputs.get()

    def mark_sent(self, frame: OutFrame) -> None:
        self.sent.append(frame)
        self.sent_at.append(time.monotonic())

    def close(self) -> None:
        self.closed = True
        self.outputs.put_nowait(None)
