"""The benchmark's workloads, driving `engine.Engine` through its public API like the scheduler.

Each chunk: `begin_chunk` for every session, then `step` with one plan per phase the sessions
need next (`next_phase`: the denoise steps, the decode and the cache pass, in the engine's
order), each step timed after a device synchronize, and `mark_delivered` once frames come back.

- global: fresh sessions, N chunks in lock-step (the reference's 81-frame workload at N = 7).
- rolling: sessions first fill their sink + window (untimed), then N chunks are timed at full
  context: the steady state of an endless session.
- mixed: session i is first advanced alone to a different chunk index (0 .. sink+window), then
  N chunks are timed with all sessions batched together at different context lengths.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from engine.api import FrameAction, Phase, StepItem, StepPlan
from engine.catalog import ModelCatalog
from engine.engine import Engine
from engine.errors import EngineError
from enginetools.bench.flops import attended_chunks, decoder_chunk_flops, dit_pass_flops
from enginetools.bench.stats import BatchRun, Clock, progress

__all__ = ["BenchError", "Driver"]

PROMPTS = (
    "a stone bridge over a mountain river at dusk",
    "a neon-lit street in the rain, seen from a moving car",
    "a sailboat on a calm sea under a pale morning sky",
    "a forest path in autumn with light through the leaves",
)
ACTIONS = [FrameAction(keys=("w",), mouse=(4.0, 0.0))]


class BenchError(EngineError):
    """The engine refused or failed an item the benchmark planned."""


@dataclass
class Driver:
    engine: Engine
    clock: Clock
    catalog: ModelCatalog  # builds a meta-device twin of the engine's decoder to count its FLOPs
    frames_at: float = 0.0  # clock time at which the latest decoded frames came back
    first_frames_at: float = 0.0  # ... and the first frames of the latest chunk() call
    _decoder_flops: dict[bool, float | None] = field(default_factory=dict)
    _opened: int = 0

    def decoder_flops(self, first: bool) -> float | None:
        if first not in self._decoder_flops:
            self._decoder_flops[first] = decoder_chunk_flops(self.engine.config, self.catalog, first)
        return self._decoder_flops[first]

    # sessions ------------------------------------------------------------------------------
    def open(self, count: int) -> list[str]:
        ids: list[str] = []
        for _ in range(count):
            sid = f"bench-{self._opened}"
            if not self.engine.open_session(
                sid, seed=self._opened, prompt=PROMPTS[self._opened % len(PROMPTS)]
            ):
                self.close(ids)
                raise BenchError("kv_full", f"the KV pool has no room for session {len(ids) + 1} of {count}")
            self._opened += 1
            ids.append(sid)
        return ids

    def close(self, ids: list[str]) -> None:
        for sid in ids:
            self.engine.close_session(sid)

    # one chunk ------------------------------------------------------------------------------
    def chunk(self, ids: list[str], run: BatchRun | None) -> dict[str, int]:
        """Generate and deliver one chunk for every session; returns frames per session and,
        when `run` is given, records each step's time and FLOPs in it."""
        for sid in ids:
            self.engine.begin_chunk(sid, ACTIONS)
        frames: dict[str, int] = {}
        first_seen = False
        while True:
            pending = {sid: self.engine.next_phase(sid) for sid in ids}
            phase = next((p for p in pending.values() if p is not None), None)
            if phase is None:
                return frames
            members = [sid for sid in ids if pending[sid] is phase]
            plan = StepPlan(tuple(StepItem(sid, phase) for sid in members))
            start = self.clock.now()
            with torch.profiler.record_function(f"bench.{phase.value}"):
                result = self.engine.step(plan)
            seconds = self.clock.now() - start
            errors = [f"{r.session_id}: {r.error}" for r in result.results if r.error]
            if errors:
                raise BenchError("step_failed", f"{phase.value} step failed: {errors}")
            if run is not None:
                flops = self._flops(phase, [r.chunk_index for r in result.results],
                                    [0 if r.chunk is None else int(r.chunk.frames.shape[0]) for r in result.results])
                run.phase(phase.value).add(seconds, flops, len(members))
                for key, value in result.seconds.items():
                    run.engine_seconds[key] = run.engine_seconds.get(key, 0.0) + value
            for r in result.results:
                if r.chunk is not None:
                    frames[r.session_id] = frames.get(r.session_id, 0) + int(r.chunk.frames.shape[0])
                    self.engine.mark_delivered(r.session_id, r.chunk_index)
                    self.frames_at = start + seconds
                    if not first_seen:  # a split first chunk returns its first frame in an earlier step
                        self.first_frames_at, first_seen = self.frames_at, True

    def _flops(self, phase: Phase, chunk_indices: list[int], frames: list[int]) -> float | None:
        config = self.engine.config
        if phase is not Phase.DECODE:
            return sum(dit_pass_flops(config, k) for k in chunk_indices)
        # a session's chunk 0 is its first decode (fewer frames: frames_for(T, first=True)), maybe
        # in two calls (first_decode_split): each call is billed its share of the chunk's frames
        first_frames = self.engine.parts.decoder.frames_for(config.latent_frames_per_chunk, first=True)
        counts = []
        for k, n in zip(chunk_indices, frames, strict=True):
            full = self.decoder_flops(k == 0)
            counts.append(None if full is None else full * (n / first_frames if k == 0 else 1.0))
        return None if any(c is None for c in counts) else sum(c or 0.0 for c in counts)

    # workloads ------------------------------------------------------------------------------
    @contextmanager
    def sessions(self, count: int) -> Iterator[list[str]]:
        """Fresh sessions for one run, closed afterwards even when the run fails."""
        ids = self.open(count)
        try:
            yield ids
        finally:
            self.close(ids)

    def warm(self, batch: int, chunks: int) -> None:
        """Untimed chunks at this batch size (first and steady shapes), so allocations and
        kernel choices for the batch are not billed to the first measured chunk."""
        with self.sessions(batch) as ids:
            for index in range(chunks):
                self.chunk(ids, None)
                progress(f"warm-up b={batch} chunk {index + 1}/{chunks} (untimed)")

    def run_global(self, batch: int, chunks: int) -> BatchRun:
        run = BatchRun("global", batch, chunks)
        run.context_chunks = [attended_chunks(self.engine.config, chunks - 1)] * batch
        with self.sessions(batch) as ids:
            self._measure(run, ids, chunks)
        return run

    def run_rolling(self, batch: int, chunks: int) -> BatchRun:
        config = self.engine.config
        fill = config.sink_chunks + config.window_chunks
        run = BatchRun("rolling", batch, chunks)
        run.context_chunks = [attended_chunks(config, fill)] * batch
        with self.sessions(batch) as ids:
            for index in range(fill):
                self.chunk(ids, None)
                progress(f"rolling b={batch} filling context {index + 1}/{fill} (untimed)")
            self._measure(run, ids, chunks)
        return run

    def run_mixed(self, batch: int, chunks: int) -> BatchRun:
        config = self.engine.config
        span = config.sink_chunks + config.window_chunks
        offsets = [round(i * span / (batch - 1)) for i in range(batch)] if batch > 1 else [span // 2]
        run = BatchRun("mixed", batch, chunks)
        run.context_chunks = [attended_chunks(config, k) for k in offsets]
        with self.sessions(batch) as ids:
            for sid, offset in zip(ids, offsets, strict=True):
                for _ in range(offset):
                    self.chunk([sid], None)
                progress(f"mixed b={batch} {sid} advanced to chunk {offset} (untimed)")
            self._measure(run, ids, chunks)
        return run

    def _measure(self, run: BatchRun, ids: list[str], chunks: int) -> None:
        """Time `chunks` chunks of every session in lock-step; the first chunk's end is the time
        to first frames when the sessions are fresh."""
        fresh = run.workload == "global"
        run.media_fps = self.engine.config.fps
        for first in (True, False):  # counted once, on the meta device, before the clock starts
            self.decoder_flops(first)
        self.clock.reset_peak()
        start = self.clock.now()
        totals = dict.fromkeys(ids, 0)
        for index in range(chunks):
            for sid, count in self.chunk(ids, run).items():
                totals[sid] += count
            elapsed = self.clock.now() - start
            if fresh and index == 0:  # frames come back at the decode, which precedes the cache pass
                run.ttff_s = self.first_frames_at - start
            progress(f"{run.workload} b={run.batch} chunk {index + 1}/{chunks} t={elapsed:.2f}s")
        run.wall_s = self.clock.now() - start
        run.frames_per_session = [totals[sid] for sid in ids]
        run.peak_memory_bytes, run.peak_memory_kind = self.clock.peak_memory()
