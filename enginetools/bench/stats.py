"""Benchmark bookkeeping: synchronized timing, per-phase samples and their summaries."""

from __future__ import annotations

import resource
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = ["BatchRun", "Clock", "PhaseSamples", "progress"]

MS = 1e3
TERA = 1e12


def progress(message: str) -> None:
    """A progress line on stderr (stdout stays free for results)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Clock:
    """Wall time after the device has finished all queued work."""

    device: torch.device

    def now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def reset_peak(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def peak_memory(self) -> tuple[int, str]:
        """(bytes, what was measured)."""
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device)), "cuda_max_memory_allocated"
        # ru_maxrss is KiB on Linux; it never resets, so it is the process's peak so far
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "process_max_rss"


@dataclass
class PhaseSamples:
    """Batched calls of one phase: seconds, FLOPs (None when unknown) and batch size per call."""

    seconds: list[float] = field(default_factory=list)
    flops: list[float | None] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)

    def add(self, seconds: float, flops: float | None, batch: int) -> None:
        self.seconds.append(seconds)
        self.flops.append(flops)
        self.batch_sizes.append(batch)

    @property
    def total_seconds(self) -> float:
        return float(sum(self.seconds))

    @property
    def total_flops(self) -> float | None:
        return None if any(f is None for f in self.flops) else float(sum(f or 0.0 for f in self.flops))

    def summary(self) -> dict[str, object]:
        if not self.seconds:
            return {"calls": 0}
        ms = np.asarray(self.seconds) * MS
        flops = self.total_flops
        return {
            "calls": len(self.seconds),
            "batch_sizes": sorted(set(self.batch_sizes)),
            "p50_ms": float(np.percentile(ms, 50)),
            "p95_ms": float(np.percentile(ms, 95)),
            "mean_ms": float(ms.mean()),
            "min_ms": float(ms.min()),
            "max_ms": float(ms.max()),
            "total_s": self.total_seconds,
            "tflop": None if flops is None else flops / TERA,
            "achieved_tflops": None if flops is None else flops / TERA / self.total_seconds,
        }


@dataclass
class BatchRun:
    """One workload at one batch size: what was timed and what came out."""

    workload: str
    batch: int
    chunks: int  # measured chunks per session
    wall_s: float = 0.0
    frames_per_session: list[int] = field(default_factory=list)
    ttff_s: float | None = None
    phases: dict[str, PhaseSamples] = field(default_factory=dict)
    context_chunks: list[int] = field(
        default_factory=list
    )  # attended chunks per session, first measured chunk
    peak_memory_bytes: int = 0
    peak_memory_kind: str = ""
    engine_seconds: dict[str, float] = field(default_factory=dict)  # the engine's own StepResult.seconds
    media_fps: float = 0.0  # video frames per second of media (the model's fps); 0 = unknown

    def phase(self, name: str) -> PhaseSamples:
        return self.phases.setdefault(name, PhaseSamples())

    def _media_cost(self, frames: int) -> dict[str, float | None]:
        """GPU seconds per second of media made (all sessions together) and its inverse, the
        real-time factor; per session, its real-time factor (>= 1: the session keeps up)."""
        if not self.media_fps or not frames:
            return {"gpu_s_per_media_s": None, "realtime_factor": None, "realtime_factor_per_session": None}
        media_s = frames / self.media_fps
        return {
            "gpu_s_per_media_s": self.wall_s / media_s,
            "realtime_factor": media_s / self.wall_s,
            "realtime_factor_per_session": media_s / len(self.frames_per_session) / self.wall_s,
        }

    def summary(self) -> dict[str, object]:
        frames = sum(self.frames_per_session)
        dit = [self.phase("denoise"), self.phase("cache")]
        dit_flops = [p.total_flops for p in dit]
        dit_seconds = sum(p.total_seconds for p in dit)
        dit_tflop = None if any(f is None for f in dit_flops) else sum(f or 0.0 for f in dit_flops) / TERA
        return {
            "workload": self.workload,
            "batch": self.batch,
            "chunks_per_session": self.chunks,
            "wall_s": self.wall_s,
            "frames_per_session": self.frames_per_session,
            "fps_aggregate": frames / self.wall_s,
            "fps_per_session": [f / self.wall_s for f in self.frames_per_session],
            "fps_per_session_mean": frames / len(self.frames_per_session) / self.wall_s,
            "ttff_ms": None if self.ttff_s is None else self.ttff_s * MS,
            **self._media_cost(frames),
            "context_chunks_per_session": self.context_chunks,
            "phases": {name: samples.summary() for name, samples in sorted(self.phases.items())},
            "dit_seconds": dit_seconds,
            "dit_tflop": dit_tflop,
            "dit_achieved_tflops": None if dit_tflop is None or not dit_seconds else dit_tflop / dit_seconds,
            "seconds_outside_steps": self.wall_s - sum(p.total_seconds for p in self.phases.values()),
            "wall_share": {
                name: samples.total_seconds / self.wall_s for name, samples in sorted(self.phases.items())
            },
            "engine_reported_seconds": self.engine_seconds,
            "peak_memory_bytes": self.peak_memory_bytes,
            "peak_memory_kind": self.peak_memory_kind,
        }
