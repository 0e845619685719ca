"""Small factories for engine tests: a tiny fp32 CPU engine and a chunk driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from engine.api import ChunkFrames, FrameAction, StepItem, StepPlan
from engine.config import tiny_config
from engine.engine import Engine

__all__ = ["W", "make_engine", "make_variant", "run_chunk", "run_chunks", "run_interpreted"]

W = FrameAction(keys=("w",))


def make_engine(**kwargs: object) -> Engine:
    options: dict[str, object] = {"model": "tiny", "device": "cpu", **kwargs}
    return Engine.create(**options)  # type: ignore[arg-type]


def make_variant(name: str, **overrides: object) -> Engine:
    """A tiny fp32 CPU engine whose config differs from tiny's by `overrides`, named `name`."""
    return Engine.create(model=tiny_config().with_overrides(name=name, **overrides), device="cpu")


def run_chunk(engine: Engine, session_id: str, actions: list[FrameAction] | None = None) -> ChunkFrames:
    """Begin a chunk and step it through every phase alone; returns its decoded frames."""
    engine.begin_chunk(session_id, actions or [FrameAction()])
    chunk = None
    while (phase := engine.next_phase(session_id)) is not None:
        result = engine.step(StepPlan((StepItem(session_id, phase),))).results[0]
        assert result.error is None, result.error
        chunk = result.chunk or chunk
    assert chunk is not None
    return chunk


def run_chunks(engine: Engine, session_id: str, count: int, actions: list[FrameAction] | None = None) -> list[ChunkFrames]:
    return [run_chunk(engine, session_id, actions) for _ in range(count)]


def run_interpreted(child: str, timeout: float = 120) -> dict[str, object]:
    """Run the Python source `child` in a process with TRITON_INTERPRET=1 (Triton picks its CPU
    interpreter when a kernel is decorated, so this process keeps its compiled setting); its last
    stdout line is a JSON report, returned."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
