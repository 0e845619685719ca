"""The daemon's start-up profile: through the model's whole attention context (sink + window
chunks), and bounded in time on a slow engine."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engine.engine import Engine
from sessiond.admission import calibrate
from sessiond.runtime.engine_host import EngineHost


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    built = Engine.create(model="tiny", device="cpu", kv_budget_bytes=1 << 20)
    built.warmup()
    yield built


def _steps(engine: Engine, **kw: object) -> list[str]:
    seen: list[str] = []
    calibrate(engine, batches=(1, 2), rounds=1, progress=lambda done, total, what: seen.append(what), **kw)
    return seen


@pytest.mark.slow
def test_the_profile_runs_through_sink_plus_window_chunks(engine: Engine) -> None:
    assert EngineHost(engine).context_chunks() == engine.config.sink_chunks + engine.config.window_chunks == 3
    assert _steps(engine, chunks=EngineHost(engine).context_chunks()) == [
        "batch 1 warm-up", "batch 1 round 0 chunk 0", "batch 1 round 0 chunk 1", "batch 1 round 0 chunk 2",
        "batch 2 warm-up", "batch 2 round 0 chunk 0", "batch 2 round 0 chunk 1", "batch 2 round 0 chunk 2",
        "offload and restore"]


@pytest.mark.slow
def test_a_spent_time_budget_stops_each_batch_size_after_one_recorded_chunk(engine: Engine) -> None:
    assert _steps(engine, chunks=7, time_budget_s=1e-6) == [
        "batch 1 warm-up", "batch 1 round 0 chunk 0", "batch 2 warm-up", "batch 2 round 0 chunk 0",
        "offload and restore"]


def test_an_engine_that_does_not_say_its_context_gets_three_chunks() -> None:
    assert EngineHost(object()).context_chunks() == 3
