"""Calibration follows each session's own phases: with a model whose stream starts with a split
decode (wan-1.3b decodes a first chunk's first latent frame alone), a batch that mixes a session
that has streamed before and a fresh one still calibrates (on the H200 it failed with wrong_phase)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engine.api import FrameAction, Phase, StepItem, StepPlan
from engine.config import tiny_config
from engine.engine import Engine
from sessiond.admission import calibrate

SPLIT = "tiny-split-decode"


@pytest.fixture
def split_engine() -> Iterator[Engine]:
    yield Engine.create(model=tiny_config().with_overrides(name=SPLIT, first_decode_split=1), device="cpu",
                        compile="off")


def _phases_of_one_chunk(engine: Engine, sid: str) -> list[Phase]:
    engine.begin_chunk(sid, [FrameAction()])
    seen = []
    while (phase := engine.next_phase(sid)) is not None:
        seen.append(phase)
        engine.step(StepPlan((StepItem(sid, phase),)))
    return seen


def test_a_first_chunk_decodes_twice_and_a_later_one_once(split_engine: Engine) -> None:
    assert split_engine.open_session("a", seed=0, prompt="p")
    steps = len(split_engine.config.denoise_timesteps)
    assert _phases_of_one_chunk(split_engine, "a") == [Phase.DENOISE] * steps + [Phase.DECODE, Phase.DECODE, Phase.CACHE]
    assert _phases_of_one_chunk(split_engine, "a") == [Phase.DENOISE] * steps + [Phase.DECODE, Phase.CACHE]


@pytest.mark.slow
def test_calibration_runs_batches_after_a_session_has_streamed(split_engine: Engine) -> None:
    cost = calibrate(split_engine, batches=(1, 2), chunks=2, rounds=1)
    samples: dict[str, int] = {}
    for item in cost.snapshot()["items"]:
        samples[item["item"]] = samples.get(item["item"], 0) + item["samples"]
    # recorded: 2 batch sizes x 2 chunks; each chunk one sample per phase, the mean of its steps:
    # its denoise steps, a cache pass, and its decodes (the first chunk of each round's fresh
    # streams decodes twice: one sample of the two)
    assert samples == {"denoise": 2 * 2, "cache": 2 * 2, "decode": 2 * 2, "offload": 1, "restore": 1}
