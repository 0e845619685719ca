"""One session's video stream for WebRTC: paced, encoded once, fanned out to its viewers.

`SessionStream` pulls the session's output (`SessionPort.next_output`), drops frames of old
generations, encodes each frame ONCE in an executor (never on the event loop), waits for its
media time (`MediaClock`: a frame late by more than a quarter of a frame interval re-anchors the
clock, so frames never leave in a burst; encoding before the wait keeps the encoder's varying
time off the send time) and hands the same H.264 access unit, stamped with the session pts
(90 kHz), to every viewer's `ViewerTrack`; aiortc's sender packetizes it with the pts as RTP
timestamp. Before the first frame of each chunk goes out, viewers get a `frames` message on
their control channel (one per run of frames with the same segment, action_seq and players: a
spectators' stream may take several chunks at once); every other output (acks,
segment_start/end, errors) goes there too.
A key frame starts the stream, every segment, every `disc` and every viewer's arrival.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import av
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from protocols.messages import FramesInfo
from transports.encoding import EncoderSettings, H264Encoder
from transports.interface import OutChunk, OutFrame, SessionPort
from transports.webrtc._clock import MediaClock

__all__ = ["KEYFRAME_MIN_INTERVAL_S", "SessionStream", "Viewer", "ViewerTrack"]

logger = logging.getLogger(__name__)

KEYFRAME_MIN_INTERVAL_S = 0.5
LATE_RESET_FRAMES = 0.25  # a frame this many frame intervals late re-anchors the media clock


def _meta(frame: OutFrame) -> tuple[Any, ...]:
    """What a `frames` message says of its frames beyond their place: one message per run of these."""
    return frame.segment, frame.action_seq, frame.players


def _run_length(frames: list[OutFrame], start: int) -> int:
    """Frames from `start` on that share its metadata (a shared stream may hand several chunks at once)."""
    n = 1
    while start + n < len(frames) and _meta(frames[start + n]) == _meta(frames[start]) and not frames[start + n].disc:
        n += 1
    return n


class ViewerTrack(MediaStreamTrack):
    """A video track fed with encoded access units; a slow reader loses whole GOP tails, never
    grows memory: on overflow the queue is emptied and the stream sends a key frame next."""

    kind = "video"

    def __init__(self, max_queued: int = 8) -> None:
        super().__init__()
        self._queue: asyncio.Queue[av.Packet | None] = asyncio.Queue(max_queued)
        self.started = asyncio.Event()  # set on the sender's first recv(): RTP is running
        self.on_started: list[Callable[[], None]] = []
        self.on_sent: Callable[[], None] | None = None  # each access unit handed to the RTP sender
        self.dropped = 0

    def push(self, packet: av.Packet) -> bool:
        """Queue one access unit; False when the queue overflowed and was emptied."""
        if self.readyState != "live":
            return True
        if self._queue.full():
            self.dropped += self._queue.qsize()
            while not self._queue.empty():
                self._queue.get_nowait()
            return False
        self._queue.put_nowait(packet)
        return True

    async def recv(self) -> av.Packet:  # type: ignore[override]
        if not self.started.is_set():
            self.started.set()
            for callback in self.on_started:
                callback()
        if self.readyState != "live":
            raise MediaStreamError
        packet = await self._queue.get()
        if packet is None:
            raise MediaStreamError
        if self.on_sent is not None:
            self.on_sent()
        return packet

    def stop(self) -> None:
        super().stop()
        while not self._queue.empty():
            self._queue.get_nowait()
        self._queue.put_nowait(None)


@dataclass(eq=False)
class Viewer:
    track: ViewerTrack
    send: Callable[[Any], None]  # puts one protocol message on the viewer's control channel


class SessionStream:
    def __init__(
        self,
        port: SessionPort,
        executor: Executor,
        crf: int = 23,
        late_reset_s: float | None = None,
        catch_up_frames: int | None = None,
    ) -> None:
        self.port = port
        self._settings = EncoderSettings(port.width, port.height, port.fps, crf=crf)
        self._executor = executor
        self._clock = MediaClock(late_reset_s if late_reset_s is not None else LATE_RESET_FRAMES / port.fps,
                                 catch_up_frames=catch_up_frames)
        self._viewers: list[Viewer] = []
        self._encoder: H264Encoder | None = None
        self._force_key = True
        self._last_segment: int | None = None
        self._viewer_started = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_requested_key = float("-inf")
        self.keyframe_requests = 0
        self.frames_sent = 0
        self.stale_dropped = 0
        self.done = asyncio.Event()  # the pump exited (session or connection closed)

    @property
    def clock_resets(self) -> int:
        return self._clock.resets

    def add_viewer(self, viewer: Viewer) -> None:
        self._viewers.append(viewer)
        self._force_key = True  # a new viewer decodes from a key frame
        viewer.track.on("ended", lambda: self.remove_viewer(viewer))
        if viewer.track.started.is_set():
            self._viewer_started.set()
        else:
            viewer.track.on_started.append(self._viewer_started.set)

    def request_keyframe(self) -> None:
        """A viewer lost packets (RTCP PLI/FIR): the next frame is encoded as a key frame, at
        most once per `KEYFRAME_MIN_INTERVAL_S` so a lossy viewer cannot force all-intra."""
        now = asyncio.get_running_loop().time()
        if now - self._last_requested_key >= KEYFRAME_MIN_INTERVAL_S:
            self._last_requested_key = now
            self._force_key = True
            self.keyframe_requests += 1

    def remove_viewer(self, viewer: Viewer) -> None:
        if viewer in self._viewers:
            self._viewers.remove(viewer)

    def remove_viewer_of(self, track: ViewerTrack) -> None:
        for viewer in [v for v in self._viewers if v.track is track]:
            self._viewers.remove(viewer)

    @property
    def viewers(self) -> int:
        return len(self._viewers)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for viewer in list(self._viewers):
            viewer.track.stop()
        self._viewers.clear()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await self._viewer_started.wait()
            self._encoder = await loop.run_in_executor(self._executor, H264Encoder, self._settings)
            while (item := await self.port.next_output()) is not None:
                if isinstance(item, OutChunk):
                    await self._play(item)
                else:
                    self._broadcast(item)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("webrtc stream of session %s failed", self.port.session_id)
        finally:
            self.done.set()

    def _stale(self, frame: OutFrame) -> bool:
        return frame.generation < self.port.generation()

    def _broadcast(self, message: Any) -> None:
        for viewer in list(self._viewers):
            viewer.send(message)

    async def _play(self, chunk: OutChunk) -> None:
        frames = [f for f in chunk.frames if not self._stale(f)]
        self.stale_dropped += len(chunk.frames) - len(frames)
        run_end = 0  # frames before this index were described by a `frames` message already
        for i, frame in enumerate(frames):
            if self._stale(frame):
                self.stale_dropped += len(frames) - i
                return
            keyframe = self._force_key or frame.disc or frame.segment != self._last_segment
            self._force_key = False
            encoder = self._encoder
            assert encoder is not None
            encoded = await asyncio.get_running_loop().run_in_executor(
                self._executor, encoder.encode, frame.rgb, frame.pts, keyframe
            )
            if not self._stale(frame):
                delay = self._clock.delay(frame.pts)
                if delay > 0:
                    await asyncio.sleep(delay)
            if self._stale(frame):  # interrupted while encoding or waiting: never sent; restart clean
                self._force_key = True
                self.stale_dropped += len(frames) - i
                return
            if i >= run_end:  # a new run of frames: its `frames` message first
                run = _run_length(frames, i)
                self._broadcast(FramesInfo(
                    idx=frame.idx, n=run, pts=frame.pts, segment=frame.segment, action_seq=frame.action_seq,
                    disc=frame.disc, players=frame.players,
                ))
                run_end = i + run
            for viewer in list(self._viewers):
                if not viewer.track.push(encoded.packet):
                    self._force_key = True
            self._last_segment = frame.segment
            self.port.mark_sent(frame)
            self.frames_sent += 1
