"""Calibration follows each session's own phases: with a model whose stream starts with a split
decode (wan-1.3b decodes a first chunk's first latent frame alone), a batch that mixes a session
that has streamed before and a fresh one still calibrates (on the H200 it failed with wrong_phase)."""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator
from types import SimpleNamespace

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


class _FirstOffloadPins:
    """The tiny engine, with a clock on which the first offload takes 3 s (a CUDA engine pins its host
    buffer then) and every later one 0.1 s, and every restore 0.05 s."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.now, self.offloads, self.restores = engine, 100.0, 0, 0

    def clock(self) -> float:
        return self.now

    def offload(self, sid: str) -> None:
        self.engine.offload(sid)
        self.now += 3.0 if self.offloads == 0 else 0.1
        self.offloads += 1

    def restore(self, sid: str) -> bool:
        self.restores += 1
        self.now += 0.05
        return self.engine.restore(sid)

    def __getattr__(self, name: str) -> object:
        return getattr(self.engine, name)


@pytest.mark.slow
def test_the_profile_records_a_warm_offload_not_the_first_one(split_engine: Engine,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    wrapped = _FirstOffloadPins(split_engine)
    module = importlib.import_module("sessiond.admission.calibrate")  # the package exports the function
    monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=wrapped.clock, thread_time=time.thread_time))
    cost = calibrate(wrapped, batches=(1,), chunks=1, rounds=1)  # type: ignore[arg-type]
    rows = {item["item"]: item for item in cost.snapshot()["items"] if item["item"] in ("offload", "restore")}
    assert (wrapped.offloads, wrapped.restores) == (2, 2)
    assert rows["offload"]["seconds"] == pytest.approx(0.1) and rows["offload"]["samples"] == 1
    assert rows["restore"]["seconds"] == pytest.approx(0.05) and rows["restore"]["samples"] == 1
