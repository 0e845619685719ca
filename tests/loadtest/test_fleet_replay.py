"""The fleet replay benchmark's arithmetic and command line (the replays themselves need a fleet:
their results are committed under load_traces/results/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from loadtest.fleet_replay import _plot, main, ratio_of

ROOT = Path(__file__).resolve().parents[2]


def test_the_ratio_is_the_fleet_over_workers_times_one_worker() -> None:
    assert ratio_of(4, 12, 3) == 1.0
    assert ratio_of(16, 40, 3) == pytest.approx(40 / 48)
    assert ratio_of(0, 5, 3) is None  # one worker served nothing: no ratio


def test_one_worker_is_not_a_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([str(ROOT / "load_traces/smoke-2.jsonl"), "--out", "/tmp/unused", "--workers", "1"])
    assert exit_.value.code == 2
    assert "--workers must be at least 2" in capsys.readouterr().err


def test_the_plot_draws_both_counts_and_the_target(tmp_path: Path) -> None:
    summary = json.loads((ROOT / "load_traces/results/fleet-3cpu-tiny-mixed-56/summary.json").read_text())
    _plot(summary, tmp_path / "w.png")
    with Image.open(tmp_path / "w.png") as png:
        assert png.size == (660, 440)
