"""Where the decoder runs: in line on the engine's device and stream (the default), on its own CUDA
stream of that device, or on another device served by its own worker thread.

A decode is launched (`DecodeLane.launch`) and finished later (`DecodeJob.result`), so the engine can
run the step's other phases (another session's denoise or cache pass) between the two: on its own
stream the decode's kernels overlap them on the GPU; on another device it runs on that device's
thread (on a CPU a second "device" is that thread, with its own torch thread setting) while the
engine thread computes. In line, launch runs the decode to the end, as the engine always did.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from engine.decoders import StreamingDecoder
from engine.errors import ConfigError

__all__ = ["PLACEMENTS", "DecodeJob", "DecodeLane", "DecoderPlacement", "decoder_device"]

PLACEMENTS = ("inline", "stream", "device")


@dataclass(frozen=True)
class DecoderPlacement:
    """mode: "inline" (the default), "stream" (its own CUDA stream; on a CPU there are no streams and
    it runs in line) or "device" (on `device`: "cuda:N", or "cpu:N", a second CPU "device" that is a
    worker thread with `threads` torch threads)."""

    mode: str = "inline"
    device: str | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in PLACEMENTS:
            raise ConfigError("bad_placement", f"decoder placement {self.mode!r} is not one of {list(PLACEMENTS)}")
        if (self.mode == "device") != (self.device is not None):
            raise ConfigError("bad_placement", "a decoder device is given with placement 'device' and only then")
        if self.threads is not None and self.threads < 1:
            raise ConfigError("bad_placement", f"decoder threads must be >= 1, got {self.threads}")

    def describe(self, engine_device: torch.device) -> str:
        if self.mode == "device":
            return f"its own worker thread on {self.device}"
        if self.mode == "stream":
            return "its own CUDA stream" if engine_device.type == "cuda" else "in line (a CPU has no streams)"
        return "in line on the engine's stream"


def decoder_device(placement: DecoderPlacement, engine_device: torch.device) -> torch.device:
    """The torch device the decoder's weights and caches live on ("cpu:N" is the CPU)."""
    if placement.mode != "device":
        return engine_device
    assert placement.device is not None
    name = placement.device
    kind, _, index = name.partition(":")
    if kind == "cpu" and (index == "" or index.isdigit()):
        return torch.device("cpu")
    if kind == "cuda" and index.isdigit():
        if not torch.cuda.is_available() or int(index) >= torch.cuda.device_count():
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            raise ConfigError("bad_device", f"decoder device {name!r} but this machine has {count} GPU(s)")
        return torch.device(name)
    raise ConfigError("bad_device", f"decoder device {name!r} is not cpu[:N] or cuda:N")


@dataclass
class DecodeJob:
    """A launched decode: `result()` waits for it and gives (frames on the host, new decoder caches)."""

    _done: tuple[np.ndarray, list[Any]] | None = None
    _future: Future[tuple[np.ndarray, list[Any]]] | None = None
    _event: Any = None  # a CUDA event recorded after the stream's copy to pinned host memory
    _pending: tuple[torch.Tensor, list[Any]] | None = None

    def result(self) -> tuple[np.ndarray, list[Any]]:
        if self._future is not None:
            return self._future.result()
        if self._event is not None:
            self._event.synchronize()
            assert self._pending is not None
            host, caches = self._pending
            self._done = (host.numpy(), caches)
            self._event = self._pending = None
        assert self._done is not None
        return self._done


class DecodeLane:
    """Runs decoder calls where the placement says; one per engine."""

    def __init__(self, placement: DecoderPlacement, decoder: StreamingDecoder, engine_device: torch.device,
                 to_host: Callable[[torch.Tensor], np.ndarray]) -> None:
        self.placement = placement
        self.decoder = decoder
        self.engine_device = engine_device
        self.device = decoder_device(placement, engine_device)
        self._to_host = to_host
        self._stream: Any = None
        self._pool: ThreadPoolExecutor | None = None
        if placement.mode == "stream" and engine_device.type == "cuda":
            self._stream = torch.cuda.Stream(engine_device)
        if placement.mode == "device":
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"engine-decoder-{placement.device}",
                                            initializer=self._init_thread)

    @property
    def asynchronous(self) -> bool:
        """Whether a launched decode may still be running when launch returns."""
        return self._stream is not None or self._pool is not None

    def _init_thread(self) -> None:
        if self.placement.threads is not None:
            torch.set_num_threads(self.placement.threads)  # OpenMP keeps it per thread
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)

    def launch(self, latents: torch.Tensor, caches: list[Any]) -> DecodeJob:
        """Start decoding `latents` (on the engine's device) with the sessions' decoder caches."""
        if self._pool is not None:
            moved = latents.to(self.device)  # across devices on the engine thread, in its stream order
            return DecodeJob(_future=self._pool.submit(self._decode_here, moved, caches))
        if self._stream is not None:
            return self._launch_on_stream(latents, caches)
        return DecodeJob(_done=self._decode_here(latents, caches))

    def _decode_here(self, latents: torch.Tensor, caches: list[Any]) -> tuple[np.ndarray, list[Any]]:
        with torch.no_grad():
            frames, new_caches = self.decoder.decode(latents, caches)
            return self._to_host(frames), new_caches

    def _launch_on_stream(self, latents: torch.Tensor, caches: list[Any]) -> DecodeJob:
        stream = self._stream
        stream.wait_stream(torch.cuda.current_stream(self.engine_device))  # the latents are written
        latents.record_stream(stream)
        with torch.no_grad(), torch.cuda.stream(stream):
            frames, new_caches = self.decoder.decode(latents, caches)
            host = torch.empty(frames.shape, dtype=frames.dtype, pin_memory=True)
            host.copy_(frames, non_blocking=True)
            event = torch.cuda.Event()
            event.record(stream)
        return DecodeJob(_event=event, _pending=(host, new_caches))

    def run(self, fn: Callable[[], Any]) -> Any:
        """Run a decoder call that is not a chunk's decode (warm-up, a snapshot's cache warm-up)
        where the decoder lives, and wait for it."""
        if self._pool is not None:
            return self._pool.submit(_no_grad, fn).result()
        if self._stream is not None:
            with torch.cuda.stream(self._stream):
                out = _no_grad(fn)
            self._stream.synchronize()
            return out
        return _no_grad(fn)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _no_grad(fn: Callable[[], Any]) -> Any:
    with torch.no_grad():
        return fn()

