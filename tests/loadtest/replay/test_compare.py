"""The policy comparison: one trace, one engine (tiny, CPU), a daemon per policy in turn."""

from __future__ import annotations

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


@pytest.mark.slow
def test_each_policy_serves_the_same_trace_and_reports_a_row(tmp_path: Path) -> None:
    said: list[str] = []
    result = run_comparison(_three_directors(), CompareConfig(max_batch=2, out_dir=str(tmp_path)), said.append)
    rows = {row["policy"]: row for row in result["rows"]}
    assert list(rows) == ["duty", "one-per-gpu", "fifo"]
    # one session per GPU with a FIFO wait list: the two later directors wait until the first one
    # closes at t=3 s, are admitted then, and have missed their objective by waiting
    one = rows["one-per-gpu"]
    assert (one["admitted"], one["rejected"], one["within_objective"], one["outside_objective"]) == (3, 0, 1, 2)
    assert (rows["fifo"]["admitted"], rows["fifo"]["rejected"]) == (3, 0)
    assert rows["duty"]["admitted"] + rows["duty"]["rejected"] == 3
    assert rows["duty"]["admitted"] >= 1
    assert all(row["stale_frames_after_ack"] == 0 and row["failed"] == 0 for row in rows.values())
    assert (tmp_path / "compare.json").exists()
    director = result["analytic_capacity"]["per_mode"]["director"]
    assert director["sessions_in_trace"] == 3 and "world" not in result["analytic_capacity"]["per_mode"]
    assert director["mean_load_bound"] >= director["at_risk"] >= 1 and director["all_at_once"] >= 1
    assert rows["duty"]["stalls"] == 0 and rows["duty"]["start_delay_p95_ms"] is not None
    assert any(line.startswith("analytic capacity, director at duty ") for line in said)
    assert sorted(p.name for p in (tmp_path / "duty").iterdir()) == ["admissions.png", "latency_cdf.png", "load.png",
                                                                     "report.json"]
    assert any("policy" in line and "in-obj" in line and "stalls" in line for line in said)
