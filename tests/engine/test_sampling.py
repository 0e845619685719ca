"""Flow-matching schedule and per-(session, chunk, step) noise seeds."""

from __future__ import annotations

import math

from engine.config import tiny_config
from engine.sampling import Schedule, noise_seed


def test_schedule_shifts_sigmas_like_flow_matching() -> None:
    schedule = Schedule.from_config(tiny_config())
    expected = [5 * s / (1 + 4 * s) for s in (1.0, 0.75, 0.5, 0.25)]
    assert all(math.isclose(a, b) for a, b in zip(schedule.sigmas, expected, strict=True))
    assert schedule.timestep(0) == 1000.0


def test_noise_seeds_differ_by_session_chunk_and_step() -> None:
    seeds = {noise_seed(1, 0, 0), noise_seed(2, 0, 0), noise_seed(1, 1, 0), noise_seed(1, 0, 1)}
    assert len(seeds) == 4
    assert noise_seed(1, 0, 0) == noise_seed(1, 0, 0)
