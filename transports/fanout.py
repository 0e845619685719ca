"""One packing of a session's frames for all of its spectators of one media mode.

A `SharedPacker` takes, in order, the frames the owner's transport put on the wire (the same
idx and pts the owner got) and the messages spectators get too (segment markers, `moved`). It
packs each run of frames ONCE, in an executor, with one `MediaPacker` (raw: `frame` messages;
fmp4: fragments of one H.264 encoder), encodes every wire message once and hands the bytes to
`deliver` in order: every spectator of that media mode shares them. A `Packed` says where a
spectator may start: raw at any frame; fmp4 at a fragment that begins with a key frame, which a
joining (or skipping) spectator asks for with `request_keyframe` (at most one per
`keyframe_interval_s`, so joiners cannot force an all-intra stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from protocols.codec import encode
from protocols.messages import Frame, Media
from transports.interface import MediaPacker, OutChunk, OutFrame

__all__ = ["KEYFRAME_INTERVAL_S", "Packed", "SharedPacker"]

logger = logging.getLogger(__name__)

KEYFRAME_INTERVAL_S = 0.5


@dataclass(frozen=True)
class Packed:
    """One wire message for every spectator of a media mode (shared, never copied per spectator)."""

    data: bytes  # the encoded message
    idx: int  # idx of its first frame; -1 for a message that carries no frame
    frames: int  # frames it carries (0 for a message)
    key: bool  # a spectator may start here (or resume after skipping)


class SharedPacker:
    def __init__(self, packer: MediaPacker, executor: Executor | None, deliver: Callable[[Packed], None], *,
                 keyframe_interval_s: float = KEYFRAME_INTERVAL_S, on_cpu: Callable[[float], None] | None = None
                 ) -> None:
        self.packer = packer
        self.media = packer.media
        self.init = [encode(m) for m in packer.start()]  # sent to each spectator before any media
        self._executor = executor
        self._deliver = deliver
        self._interval = keyframe_interval_s
        self._on_cpu = on_cpu  # thread CPU seconds of each pack (admission measures spectators' cost)
        self._inbox: deque[Any] = deque()
        self._event = asyncio.Event()
        self._want_key = False
        self._last_key_request = float("-inf")
        self._task: asyncio.Task[None] | None = None
        self.keyframe_requests = 0
        self.frames_packed = 0
        self.cpu_s = 0.0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"fanout-{self.media}")

    def frame(self, frame: OutFrame) -> None:
        self._inbox.append(frame)
        self._event.set()

    def message(self, message: Any) -> None:
        self._inbox.append(message)
        self._event.set()

    def request_keyframe(self) -> None:
        """The next frame packed starts a key fragment (fmp4; raw frames are all starts)."""
        if not hasattr(self.packer, "force_keyframe"):
            return
        now = time.monotonic()
        if now - self._last_key_request >= self._interval:
            self._last_key_request = now
            self._want_key = True
            self.keyframe_requests += 1

    def stop(self) -> None:
        """Stop packing now (its last spectator left); `start` runs it again."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._event.wait()
            self._event.clear()
            while self._inbox:
                if not isinstance(self._inbox[0], OutFrame):
                    self._deliver(Packed(encode(self._inbox.popleft()), -1, 0, True))
                    continue
                frames = []
                while self._inbox and isinstance(self._inbox[0], OutFrame):
                    frames.append(self._inbox.popleft())
                force, self._want_key = self._want_key, False
                try:
                    packed, cpu = await loop.run_in_executor(self._executor, self._pack, tuple(frames), force)
                except (ValueError, RuntimeError, OSError) as exc:  # a frame the packer cannot take: skip it
                    logger.error("shared %s packing of %d frames failed: %r", self.media, len(frames), exc)
                    continue
                self.cpu_s += cpu
                self.frames_packed += len(frames)
                if self._on_cpu is not None:
                    self._on_cpu(cpu)
                for item in packed:
                    self._deliver(item)

    def _pack(self, frames: tuple[OutFrame, ...], force_key: bool) -> tuple[list[Packed], float]:
        """CPU work (an executor thread): pack and encode once."""
        started = time.thread_time()
        force = getattr(self.packer, "force_keyframe", None)
        if force_key and force is not None:
            force()
        messages = self.packer.pack(OutChunk(frames=frames))
        keys: list[bool] = list(getattr(self.packer, "key_starts", ()))
        out = []
        for i, msg in enumerate(messages):
            if isinstance(msg, Frame):
                out.append(Packed(encode(msg), msg.idx, 1, True))
            elif isinstance(msg, Media):
                out.append(Packed(encode(msg), msg.idx, msg.n, keys[i] if i < len(keys) else False))
            else:
                out.append(Packed(encode(msg), -1, 0, True))
        return out, time.thread_time() - started
