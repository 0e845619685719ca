"""Small factories for engine tests: a tiny fp32 CPU engine and a chunk driver."""

from __future__ import annotations

from engine.api import ChunkFrames, FrameAction, StepItem, StepPlan
from engine.config import tiny_config
from engine.engine import Engine

__all__ = ["W", "make_engine", "make_variant", "run_chunk", "run_chunks"]

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
