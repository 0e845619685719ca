"""The family table: per trace and policy the sessions within and outside objective beside the
analytic capacity, and per policy what the acceptance reads (outside objective, within / analytic)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadtest.replay.compare import trace_capacity
from loadtest.replay.family_report import family_rows, family_summary, format_family, write_family_plot


def _row(policy: str, admitted: int, rejected: int, within: int, **kw: Any) -> dict[str, Any]:
    return {"policy": policy, "admitted": admitted, "rejected": rejected, "failed": 0, "within_objective": within,
            "outside_objective": admitted - within, "start_delay_p95_ms": kw.get("start", 900.0),
            "stalls": kw.get("stalls", 0), "miss_rate": kw.get("miss"), "segments_missed_share": kw.get("missed")}


def _per_trace() -> dict[str, dict[str, Any]]:
    return {
        "directors-busy-5": {"analytic_capacity": {"sessions": 2},
                             "rows": [_row("duty", 2, 3, 2, missed=0.0), _row("fifo", 5, 0, 1, stalls=4, missed=0.6)]},
        "players-few-3": {"analytic_capacity": {"sessions": 4},
                          "rows": [_row("duty", 3, 0, 3, start=None, miss=0.002), _row("fifo", 3, 0, 3, start=None)]},
        "directors-idle-12": {"analytic_capacity": {"sessions": 0},
                              "rows": [_row("duty", 0, 12, 0), _row("fifo", 12, 0, 0)]},
    }


def test_rows_put_each_policy_beside_the_analytic_capacity_of_its_trace() -> None:
    rows = family_rows(_per_trace())
    assert [(r["trace"], r["policy"]) for r in rows] == [
        ("directors-busy-5", "duty"), ("directors-busy-5", "fifo"), ("players-few-3", "duty"),
        ("players-few-3", "fifo"), ("directors-idle-12", "duty"), ("directors-idle-12", "fifo")]
    assert rows[0] | {} == {"trace": "directors-busy-5", "policy": "duty", "sessions": 5, "admitted": 2,
                            "within_objective": 2, "outside_objective": 0, "analytic": 2, "within_over_analytic": 1.0,
                            "start_delay_p95_ms": 900.0, "stalls": 0, "miss_rate": None, "segments_missed_share": 0.0}
    assert rows[2]["within_over_analytic"] == 0.75 and rows[4]["within_over_analytic"] is None


def test_the_summary_counts_sessions_outside_objective_and_averages_within_over_analytic_capped_at_one() -> None:
    summary = family_summary(family_rows(_per_trace()))
    assert summary["duty"] == {"traces": 3, "outside_objective": 0, "traces_with_outside": [],
                               "mean_within_over_analytic": 0.875}
    assert summary["fifo"] == {"traces": 3, "outside_objective": 16,
                               "traces_with_outside": ["directors-busy-5", "directors-idle-12"],
                               "mean_within_over_analytic": 0.625}


def test_the_table_is_markdown_with_a_line_per_policy(tmp_path: Path) -> None:
    text = format_family(family_rows(_per_trace()))
    lines = text.splitlines()
    assert lines[0].startswith("| trace | policy | sessions | admitted | within | outside | analytic |")
    assert lines[2] == "| directors-busy-5 | duty | 5 | 2 | 2 | 0 | 2 | 1.000 | 900 | 0 | - | 0.000 |"
    assert ("duty: 3 traces, 0 sessions admitted outside objective (none), within / analytic capacity 0.875 "
            "on average") in text
    assert "fifo: 3 traces, 16 sessions admitted outside objective (directors-busy-5, directors-idle-12)" in text
    path = write_family_plot(family_rows(_per_trace()), tmp_path / "family.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _mode(n: int, at_risk: int) -> dict[str, int]:
    return {"sessions_in_trace": n, "at_risk": at_risk}


def test_a_trace_capacity_is_the_fewer_of_its_sessions_and_what_fits() -> None:
    assert trace_capacity({"director": _mode(8, 3)}) == 3
    assert trace_capacity({"director": _mode(2, 3)}) == 2
    assert trace_capacity({"world": _mode(4, 0)}) == 0
    # half the sessions of each mode: each director takes 1/4 of the GPU, each player 1/2: 8/3 fit
    assert trace_capacity({"director": _mode(3, 4), "world": _mode(3, 2)}) == 2
    assert trace_capacity({"director": _mode(1, 4), "world": _mode(1, 4)}) == 2
    assert trace_capacity({"director": _mode(2, 0), "world": _mode(2, 1)}) == 1
