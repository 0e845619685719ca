"""The serving table: per concurrency level, what N sessions of one mode got from a real daemon."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.replay.meter import SessionResult
from loadtest.replay.runner import ReplayOutcome
from loadtest.serving import ServingConfig, level_figures, level_trace
from loadtest.serving_report import format_serving
from sessiond.admission.decision import Objectives


def test_a_world_level_is_n_players_pressing_keys_from_the_start_without_pause() -> None:
    trace = level_trace(ServingConfig(mode="world", seconds=10.0), 4, seed=1)
    assert trace.header.name == "serving-world-4"
    assert len(trace.sessions()) == 4
    assert {e.ev for e in trace.events} == {"create", "action", "close"}
    assert max(e.t for e in trace.events if e.ev == "create") == 0.0
    for key in trace.sessions():
        actions = [e.t for e in trace.events_of(key) if e.ev == "action"]
        assert max(b - a for a, b in itertools.pairwise(actions)) < 0.1  # 30-60 Hz throughout
        assert actions[-1] > 9.0


def test_a_director_level_is_n_directors_asking_for_their_segments_back_to_back() -> None:
    trace = level_trace(ServingConfig(mode="director", segments=3, segment_s=2.0), 5, seed=2)
    assert trace.header.name == "serving-director-5"
    for key in trace.sessions():
        directs = [e for e in trace.events_of(key) if e.ev == "direct"]
        assert len(directs) == 3 and {d.fields["seconds"] for d in directs} == {2.0}
    assert {e.ev for e in trace.events} == {"create", "direct", "close"}


def _result(key: str, mode: str, frames: list[float], segment_ms: list[float]) -> SessionResult:
    r = SessionResult(key, mode)
    r.status, r.frames_received, r.frame_times_s, r.segment_ms = "admitted", len(frames), frames, segment_ms
    r.ttff_ms = [100.0 if key == "a" else 300.0]
    return r


def test_level_figures_are_rates_over_the_wall_time_and_the_media_generated() -> None:
    fps = 16
    steady = [0.0, *[1.0 + i / fps for i in range(33)]]  # a first frame, then 2 s of frames at real time
    slow = [0.0, *[1.0 + i / (fps / 2) for i in range(33)]]  # ... at half real time
    cfg = ServingConfig(mode="world")
    trace = level_trace(cfg, 2, seed=0)
    outcome = ReplayOutcome(trace, "http://x", 1.0, "paced", Objectives(), "t", 10.0,
                            [_result("a", "world", steady, []), _result("b", "world", slow, [])], {})
    got = level_figures(outcome, cfg, fps, engine_s=4.0, frames_generated=160.0)
    assert got["sessions"] == got["admitted"] == 2
    assert got["frames_per_s"] == pytest.approx(6.8)  # 68 frames in 10 s
    assert got["rtf_mean"] == pytest.approx(1.5) and got["rtf_p95"] == pytest.approx(1.95)
    assert got["engine_s_per_media_s"] == pytest.approx(0.4)  # 4 s of steps for 10 media s
    assert (got["ttff_p50_ms"], got["ttff_p95_ms"]) == (200.0, 290.0)
    director = ServingConfig(mode="director", segment_s=5.0)
    outcome = ReplayOutcome(level_trace(director, 1, seed=0), "http://x", 1.0, "saturating", Objectives(), "t", 12.0,
                            [_result("a", "director", [0.5], [4000.0, 6000.0])], {})
    assert level_figures(outcome, director, fps, 1.0, 16.0)["rtf_mean"] == pytest.approx(1.0)


def test_the_table_gives_the_mean_and_half_the_range_of_the_starts() -> None:
    row = {"admitted": 2.0, "admitted_spread": 0.0, "stalls": 0.0, "stalls_spread": 0.0,
           "frames_per_s": 31.5, "frames_per_s_spread": 1.0, "ttff_p50_ms": 120.0, "ttff_p50_ms_spread": 20.0,
           "ttff_p95_ms": 150.0, "ttff_p95_ms_spread": None, "rtf_mean": 0.95, "rtf_mean_spread": 0.1,
           "rtf_p95": None, "rtf_p95_spread": None, "miss_rate": 0.0, "miss_rate_spread": 0.0,
           "engine_s_per_media_s": 0.731, "engine_s_per_media_s_spread": 0.02}
    text = format_serving({"config": {"mode": "world", "model": "demo", "device": "cpu"}, "daemon": {"starts": 2},
                           "levels": {"2": row}})
    assert text.splitlines()[-1] == "| 2 | 2.0 | 31.50 ±0.50 | 120 ±10 | 150 | 0.95 ±0.05 | - | 0.000 ±0.000 | 0.731 ±0.010 |"


@pytest.mark.slow
def test_a_sweep_against_a_real_daemon_writes_its_table_json_and_plot(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "loadtest.serving", "--model", "tiny", "--levels", "1,2", "--starts",
                           "1", "--seconds", "4", "--cpu-threads", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "serving.json").read_text())
    assert list(result["levels"]) == ["1", "2"]
    assert [result["levels"][n]["admitted"] for n in ("1", "2")] == [1.0, 2.0]
    assert all(result["levels"][n]["frames_per_s"] > 0 and result["levels"][n]["miss_rate"] is not None
               for n in ("1", "2"))
    assert result["daemon"] == {"policy": "kv", "max_sessions": 2, "starts": 1}
    assert (tmp_path / "serving.md").read_text().startswith("world sessions, tiny on cpu, mean of 1 daemon starts")
    assert (tmp_path / "serving.png").read_bytes()[:4] == b"\x89PNG"


def test_bad_levels_are_refused_with_their_flag() -> None:
    done = subprocess.run([sys.executable, "-m", "loadtest.serving", "--levels", "1,x"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "--levels takes whole numbers separated by commas, got '1,x'" in done.stderr


def test_the_table_names_the_strategy_it_ran() -> None:
    strategy = {"name": "two-replicas", "path": "strategies/two-replicas.toml", "engine": {"replicas": 2},
                "decoder": "in line on the engine's stream"}
    text = format_serving({"config": {"mode": "world", "model": "demo", "device": "cpu"}, "daemon": {"starts": 1},
                           "strategy": strategy, "levels": {}})
    assert text.splitlines()[0] == ("world sessions, demo on cpu, mean of 1 daemon starts (± half the range), "
                                    "`sessiond serve --policy kv --strategy strategies/two-replicas.toml` (strategy "
                                    "two-replicas: decoder in line on the engine's stream, 2 engine replicas)")


@pytest.mark.slow
def test_a_sweep_runs_the_strategy_it_is_given(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "loadtest.serving", "--model", "tiny", "--levels", "2", "--starts",
                           "1", "--seconds", "3", "--cpu-threads", "1", "--strategy", "strategies/decoder-device.toml",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "serving.json").read_text())
    assert result["config"]["strategy"] == "strategies/decoder-device.toml"
    assert (result["strategy"]["name"], result["strategy"]["decoder"]) == ("decoder-device",
                                                                          "its own worker thread on cpu:1")
    assert result["levels"]["2"]["admitted"] == 2.0 and result["levels"]["2"]["frames_per_s"] > 0


@pytest.mark.slow
def test_strategies_compared_in_one_sweep_interleave_their_daemon_starts(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "loadtest.serving", "--model", "tiny", "--levels", "1", "--starts",
                           "2", "--seconds", "2", "--cpu-threads", "1", "--strategy", "strategies/default.toml",
                           "--strategy", "strategies/two-replicas.toml", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    starts = [line.split(",")[1].strip() for line in done.stdout.splitlines() if line.startswith("start ")]
    assert starts == ["strategy default", "strategy two-replicas"] * 2
    for stem, replicas in (("default", 1), ("two-replicas", 2)):
        result = json.loads((tmp_path / stem / "serving.json").read_text())
        assert result["strategy"]["engine"]["replicas"] == replicas
        assert result["daemon"]["starts"] == 2 and len(result["per_start"]) == 2
        assert sorted(p.name for p in (tmp_path / stem).glob("daemon-*.log")) == ["daemon-1.log", "daemon-2.log"]
    compare = (tmp_path / "compare.md").read_text()
    assert "--strategy strategies/default.toml" in compare and "--strategy strategies/two-replicas.toml" in compare
