"""A session's output stream: the outbox of decoded chunks and messages, the generation
counter, idx/pts assignment at hand-out, the `received` window and sent accounting.

Invariants (docs/protocol.md, Time): the n-th frame SENT has idx n and pts pts_for(n); a generation
bump (interrupt, flush, cut, reconnect) drops every unsent frame of the old generation and
rewinds the next idx to the number actually sent, so the timeline never skips or goes back.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from protocols.timeline import pts_for
from transports.interface import OutChunk, OutFrame

__all__ = ["MediaItem", "OutputStream"]

Marker = Callable[[], Any]  # a message built when handed out (its pts depends on what was sent)


@dataclass(frozen=True)
class MediaItem:
    """Decoded frames of one chunk waiting to be handed to the connection."""

    generation: int
    chunk_index: int
    frames: np.ndarray  # uint8 (n, height, width, 3): the engine's decoded frames, as they came
    segment: int
    action_seq: int
    players: tuple[int, ...] | None = None  # co-play: each player's newest applied action


class OutputStream:
    def __init__(self, fps: int, window_frames: int, frames_sent: int, *, disc: bool) -> None:
        self.fps = fps
        self.window_frames = window_frames
        self.generation = 0
        self.sent = frames_sent  # frames put on the wire, ever (the PTS position)
        self.next_idx = frames_sent  # idx of the next frame handed out
        self.disc_next = disc
        self.acked: int | None = None  # highest idx the client said it received
        self.control: deque[Any] = deque()
        self.media: deque[MediaItem | Marker] = deque()
        self.media_frames = 0
        self.handed: deque[tuple[int, int]] = deque()  # (first idx, chunk index) handed, not yet sent
        self._handed_by_segment: dict[int, int] = {}  # segment -> its frames handed out (current timeline)
        self._sent_by_segment: dict[int, int] = {}  # segment -> its frames put on the wire
        self.event = asyncio.Event()

    # ---- producing ---------------------------------------------------------------------------
    def push_control(self, message: Any) -> int:
        self.control.append(message)
        self.event.set()
        return len(self.control)

    def drop_control(self, kind: type) -> None:
        """Control messages of `kind` not yet handed out are dropped (a latest-wins message)."""
        self.control = deque(m for m in self.control if not isinstance(m, kind))

    def push_marker(self, build: Marker) -> None:
        self.media.append(build)
        self.event.set()

    def push_frames(self, chunk_index: int, frames: np.ndarray, segment: int, action_seq: int,
                    players: tuple[int, ...] | None = None) -> None:
        """Decoded frames of one chunk, as the engine made them, into this generation's outbox."""
        self.push_media(MediaItem(self.generation, chunk_index, frames, segment, action_seq, players))

    def push_media(self, item: MediaItem) -> None:
        self.media.append(item)
        self.media_frames += len(item.frames)
        self.event.set()

    @property
    def total(self) -> int:
        """Timeline position after every frame handed out or waiting to be."""
        return self.next_idx + self.media_frames

    def last_sent_pts(self) -> int | None:
        return pts_for(self.sent - 1, self.fps) if self.sent > 0 else None

    def bump(self) -> int:
        """New generation: drop unsent frames; returns how many were dropped."""
        self.generation += 1
        dropped = self.media_frames + (self.next_idx - self.sent)
        self.media = deque(m for m in self.media if not isinstance(m, MediaItem))
        self.media_frames = 0
        self.next_idx = self.sent
        self.handed.clear()
        self._handed_by_segment = dict(self._sent_by_segment)  # what was handed but not sent is gone
        self.disc_next = True
        self.event.set()
        return dropped

    def reset_connection(self) -> None:
        self.control.clear()
        self.acked = None
        self.event.set()

    # ---- consuming ---------------------------------------------------------------------------
    def window_open(self, n: int) -> bool:
        if self.acked is None:
            return True
        unacked = self.next_idx - (self.acked + 1)
        return unacked <= 0 or unacked + n <= self.window_frames

    def take(self) -> OutChunk | Any | None:
        """The next thing to hand out, or None when there is nothing (or the window is shut)."""
        if self.control:
            return self.control.popleft()
        while self.media:
            head = self.media[0]
            if not isinstance(head, MediaItem):
                self.media.popleft()
                return head()
            if not self.window_open(len(head.frames)):
                return None
            self.media.popleft()
            self.media_frames -= len(head.frames)
            return self._hand_out(head)
        return None

    def _hand_out(self, item: MediaItem) -> OutChunk:
        frames = []
        for i in range(len(item.frames)):
            idx = self.next_idx + i
            frames.append(OutFrame(
                pts=pts_for(idx, self.fps), idx=idx, segment=item.segment, action_seq=item.action_seq,
                disc=self.disc_next and i == 0, generation=self.generation, rgb=item.frames[i],
                players=item.players,
            ))
        self.handed.append((self.next_idx, item.chunk_index))
        self._handed_by_segment[item.segment] = self._handed_by_segment.get(item.segment, 0) + len(frames)
        self.next_idx += len(frames)
        self.disc_next = False
        return OutChunk(frames=tuple(frames))

    def sent_one(self, frame: OutFrame) -> list[int]:
        """Account one frame put on the wire; returns chunk indices that just reached the viewer."""
        if frame.idx >= self.sent:
            self._sent_by_segment[frame.segment] = self._sent_by_segment.get(frame.segment, 0) + 1
        self.sent = max(self.sent, frame.idx + 1)
        reached = []
        while self.handed and self.handed[0][0] <= frame.idx:
            reached.append(self.handed.popleft()[1])
        return reached

    def segment_frames(self, segment: int) -> int:
        """Frames of `segment` that were or will be sent: handed out in this generation (a bump
        takes back only what had not gone out)."""
        return self._handed_by_segment.get(segment, 0)

    def forget_segment(self, segment: int) -> None:
        self._handed_by_segment.pop(segment, None)
        self._sent_by_segment.pop(segment, None)

    def received(self, idx: int) -> None:
        # clamped to what was handed out: WebRTC announces a chunk (`frames`) before its paced frames
        # go out, and a client acking it must open the window (clamping to frames already sent
        # would keep it shut for good). -1: nothing received yet, but the window now applies.
        clamped = min(idx, self.next_idx - 1)
        if self.acked is None or clamped > self.acked:
            self.acked = clamped
            self.event.set()
