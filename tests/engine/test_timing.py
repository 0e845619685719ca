"""median_seconds: one untimed warm call (unless told not to), then the median of the timed ones."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from engine import _timing as timing
from engine._timing import median_seconds


def test_the_warm_call_is_not_timed_and_the_median_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    durations = iter([5.0, 0.03, 0.01, 0.02])  # the warm call, then three timed calls
    calls: list[float] = []
    clock = SimpleNamespace(now=0.0)

    def fn() -> None:
        step = next(durations)
        calls.append(step)
        clock.now += step

    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    assert median_seconds(fn, torch.device("cpu"), repeats=3) == pytest.approx(0.02)
    assert calls == [5.0, 0.03, 0.01, 0.02]


def test_without_warm_every_call_is_timed() -> None:
    count = [0]

    def fn() -> None:
        count[0] += 1

    assert median_seconds(fn, torch.device("cpu"), repeats=4, warm=False) >= 0.0
    assert count[0] == 4
