"""The policy comparison: traces replayed from this process against a `sessiond serve` process per
policy (tiny model, CPU), as a user runs it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loadtest.replay.compare import CompareConfig, run_comparison
from sessiond.traces import Trace, TraceEvent, TraceHeader


def _three_directors() -> Trace:
    events: list[TraceEvent] = []
    for i in range(3):
        key = f"d{i}"
        events += [TraceEvent(0.1 * i, key, "create", {"mode": "director", "prompt": "a harbour"}),
                   TraceEvent(0.5 + 0.1 * i, key, "direct", {"prompt": "boats at dawn", "seconds": 1.0}),
                   TraceEvent(3.0, key, "close", {})]
    return Trace(TraceHeader("three-directors", "synthesized"), tuple(sorted(events, key=lambda e: e.t)))


def _one_player() -> Trace:
    events = (TraceEvent(0.0, "g0", "create", {"mode": "world", "prompt": "a meadow"}),
              TraceEvent(0.5, "g0", "action", {"keys": ["w"]}), TraceEvent(2.0, "g0", "close", {}))
    return Trace(TraceHeader("one-player", "synthesized"), events)


@pytest.mark.slow
def test_each_policy_is_a_daemon_process_serving_every_trace_and_the_family_table_is_written(tmp_path: Path) -> None:
    said: list[str] = []
    result = run_comparison([_three_directors(), _one_player()],
                            CompareConfig(max_batch=2, out_dir=str(tmp_path), cpu_threads=1), said.append)
    assert list(result["daemons"]) == ["duty", "one-per-gpu", "fifo"]
    pids = {d["pid"] for d in result["daemons"].values()}
    assert len(pids) == 3 and os.getpid() not in pids
    assert all(d["calibration"]["calibrated"] for d in result["daemons"].values())
    rows = {row["policy"]: row for row in result["per_trace"]["three-directors"]["rows"]}
    assert list(rows) == ["duty", "one-per-gpu", "fifo"]
    # one session per GPU with a FIFO wait list: the two later directors wait until the first one
    # closes at t=3 s, are admitted then, and have missed their objective by waiting
    one = rows["one-per-gpu"]
    assert (one["admitted"], one["rejected"], one["within_objective"], one["outside_objective"]) == (3, 0, 1, 2)
    assert (rows["fifo"]["admitted"], rows["fifo"]["rejected"]) == (3, 0)
    assert rows["duty"]["admitted"] + rows["duty"]["rejected"] == 3
    assert rows["duty"]["admitted"] >= 1
    assert all(row["stale_frames_after_ack"] == 0 and row["failed"] == 0 for row in rows.values())
    assert rows["duty"]["stalls"] == 0 and rows["duty"]["start_delay_p95_ms"] is not None
    assert rows["duty"]["segments_judged"] == rows["duty"]["admitted"]
    player = {row["policy"]: row for row in result["per_trace"]["one-player"]["rows"]}
    assert [(r["admitted"], r["rejected"]) for r in player.values()] == [(1, 0)] * 3
    director = result["per_trace"]["three-directors"]["analytic_capacity"]["per_mode"]["director"]
    assert director["sessions_in_trace"] == 3
    assert "world" not in result["per_trace"]["three-directors"]["analytic_capacity"]["per_mode"]
    assert director["mean_load_bound"] >= director["at_risk"] >= 1 and director["all_at_once"] >= 1
    assert any(line.startswith("analytic capacity, director at duty ") for line in said)
    assert [(r["trace"], r["policy"]) for r in result["family"]][:3] == [
        ("three-directors", "duty"), ("three-directors", "one-per-gpu"), ("three-directors", "fifo")]
    written = json.loads((tmp_path / "compare.json").read_text())
    assert written["family"] == result["family"]
    assert (tmp_path / "family.md").read_text().startswith("| trace | policy |")
    assert (tmp_path / "family.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in (tmp_path / "duty" / "three-directors").iterdir()) == [
        "admissions.png", "latency_cdf.png", "load.png", "report.json"]
    assert (tmp_path / "daemon-fifo.log").exists()
