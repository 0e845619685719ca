"""Measurements behind `python -m transports.bench`: CPU per frame and added latency of each
transport, on synthetic but realistic content (a moving scene with texture and mild noise,
which costs x264 about what generated video does; flat test patterns would flatter it)."""

from __future__ import annotations

import asyncio
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from aiortc.codecs.h264 import H264Encoder as RtpH264Packetizer

from protocols.timeline import pts_for, pts_seconds
from transports.encoding import EncoderSettings, H264Encoder
from transports.fmp4 import Fmp4Packer
from transports.interface import OutChunk, OutFrame
from transports.webrtc.stream import SessionStream, Viewer, ViewerTrack

__all__ = ["Case", "cpu_fmp4", "cpu_webrtc", "latency_fmp4", "latency_webrtc", "scene"]


@dataclass(frozen=True)
class Case:
    width: int
    height: int
    fps: int = 16
    chunk: int = 4  # frames per engine chunk


def scene(case: Case, n: int, seed: int = 0) -> list[np.ndarray]:
    """n RGB frames of a scene panning 3 px per frame, with texture, a moving object and noise."""
    rng = np.random.default_rng(seed)
    w, h = case.width, case.height
    base = rng.integers(0, 255, (h // 8 + 1, (w + 3 * n) // 8 + 2, 3), dtype=np.uint8)
    texture = np.kron(base, np.ones((8, 8, 1), dtype=np.uint8)).astype(np.int16)
    y, x = np.mgrid[0:h, 0:w]
    frames = []
    for i in range(n):
        img = texture[:h, 3 * i : 3 * i + w].copy()
        img += ((x + y + 4 * i) % 64).astype(np.int16)[..., None]
        cx, cy = (w // 4 + 5 * i) % w, h // 2
        img[max(0, cy - 24) : cy + 24, max(0, cx - 24) : cx + 24] = (240, 200, 40)
        img += rng.integers(-6, 7, img.shape, dtype=np.int16)
        frames.append(np.clip(img, 0, 255).astype(np.uint8))
    return frames


def _chunks(case: Case, frames: list[np.ndarray]) -> list[OutChunk]:
    out = []
    for start in range(0, len(frames), case.chunk):
        out.append(OutChunk(tuple(
            OutFrame(pts=pts_for(i, case.fps), idx=i, segment=0, action_seq=-1, disc=False, generation=0,
                     rgb=frames[i])
            for i in range(start, min(len(frames), start + case.chunk))
        )))
    return out


def cpu_fmp4(case: Case, frames: list[np.ndarray]) -> float:
    """CPU ms per frame of Fmp4Packer.pack (RGB -> YUV, x264, moof+mdat), one thread."""
    packer = Fmp4Packer(case.width, case.height, case.fps)
    packer.start()
    chunks = _chunks(case, frames)
    packer.pack(chunks[0])  # warm: first key frame, allocations
    t0 = time.process_time()
    for chunk in chunks[1:]:
        packer.pack(chunk)
    return (time.process_time() - t0) * 1000 / sum(len(c.frames) for c in chunks[1:])


def cpu_webrtc(case: Case, frames: list[np.ndarray]) -> float:
    """CPU ms per frame of the shared encoder (RGB -> YUV, x264) plus aiortc's RTP packetizing."""
    encoder = H264Encoder(EncoderSettings(case.width, case.height, case.fps))
    packetizer = RtpH264Packetizer()

    def one(i: int) -> None:
        packetizer.pack(encoder.encode(frames[i], pts_for(i, case.fps)).packet)

    one(0)
    t0 = time.process_time()
    for i in range(1, len(frames)):
        one(i)
    return (time.process_time() - t0) * 1000 / (len(frames) - 1)


def _percentiles(values: list[float]) -> tuple[float, float]:
    qs = statistics.quantiles(values, n=20, method="inclusive")
    return statistics.median(values), qs[18]


async def _latency_fmp4(case: Case, frames: list[np.ndarray]) -> list[float]:
    """Chunks arrive at their real cadence; each is packed in an executor (as the WebSocket
    handler does) and its bytes written to a loopback TCP socket. Per frame: write done - ready."""
    packer = Fmp4Packer(case.width, case.height, case.fps)
    packer.start()
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    period = case.chunk / case.fps
    with ThreadPoolExecutor(1) as executor:
        start = time.monotonic()
        for k, chunk in enumerate(_chunks(case, frames)):
            await asyncio.sleep(max(0.0, start + k * period - time.monotonic()))
            ready = time.monotonic()
            for message in await loop.run_in_executor(executor, packer.pack, chunk):
                writer.write(message.data)
                await writer.drain()
                latencies += [time.monotonic() - ready] * message.n
    writer.close()
    server.close()
    return latencies[case.chunk :]  # after the first chunk (warm-up)


class _PacedPort:
    """Delivers chunks at their real cadence, as a world session does."""

    def __init__(self, case: Case, chunks: list[OutChunk]) -> None:
        self.session_id, self.width, self.height, self.fps = "bench", case.width, case.height, case.fps
        self._chunks = list(chunks)
        self._case = case
        self.ready: dict[int, float] = {}
        self._start: float | None = None

    def generation(self) -> int:
        return 0

    def submit(self, message: Any) -> None:
        return None

    async def next_output(self) -> OutChunk | None:
        if not self._chunks:
            await asyncio.sleep(3600)
            return None
        chunk = self._chunks.pop(0)
        first = chunk.frames[0]
        if self._start is None:
            self._start = time.monotonic()
        await asyncio.sleep(max(0.0, self._start + pts_seconds(first.pts) - time.monotonic()))
        now = time.monotonic()
        for f in chunk.frames:  # a frame is ready when it arrived AND its media time has come
            self.ready[f.idx] = max(now, self._start + pts_seconds(f.pts))
        return chunk

    def mark_sent(self, frame: OutFrame) -> None:
        return None

    def close(self) -> None:
        return None


async def _latency_webrtc(case: Case, frames: list[np.ndarray]) -> list[float]:
    """The real SessionStream (pacing, executor encode) feeding a viewer track whose reader
    packetizes like aiortc's sender. Per frame: RTP payloads ready - frame ready."""
    port = _PacedPort(case, _chunks(case, frames))
    packetizer = RtpH264Packetizer()
    latencies: list[float] = []
    with ThreadPoolExecutor(1) as executor:
        stream = SessionStream(port, executor)
        track = ViewerTrack()
        stream.add_viewer(Viewer(track, lambda message: None))
        stream.start()
        for i in range(len(frames)):
            packet = await track.recv()
            packetizer.pack(packet)
            latencies.append(time.monotonic() - port.ready[i])
        await stream.close()
    return latencies[case.chunk :]


def latency_fmp4(case: Case, frames: list[np.ndarray]) -> tuple[float, float]:
    return _percentiles(asyncio.run(_latency_fmp4(case, frames)))


def latency_webrtc(case: Case, frames: list[np.ndarray]) -> tuple[float, float]:
    return _percentiles(asyncio.run(_latency_webrtc(case, frames)))
