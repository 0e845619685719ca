"""The replay report carries every field of docs/traces.md, nulls for empty statistics, and plots."""

from __future__ import annotations

import json
from pathlib import Path

from loadtest.replay.meter import SessionResult
from loadtest.replay.plots import PLOT_FILES, write_plots
from loadtest.replay.report import REQUIRED_FIELDS, build_report, format_table
from loadtest.replay.runner import ReplayOutcome
from sessiond.admission import Objectives
from sessiond.traces import Trace, TraceHeader


def _outcome(results: list[SessionResult]) -> ReplayOutcome:
    return ReplayOutcome(trace=Trace(TraceHeader("unit", "synthesized"), ()), url="http://127.0.0.1:1", speed=1.0,
                         mode="paced", objectives=Objectives(), started_at="2026-11-29T15:00:00+00:00",
                         duration_s=4.0, results=results, errors={},
                         timeline={"t": [0.0, 1.0], "active": [1, 1], "predicted_load": [None, 0.4]},
                         capacity={"admission": {"policy": "duty"}})


def _world() -> SessionResult:
    r = SessionResult("g1", "world", status="admitted", session_id="s_1", frames_received=100, frames_expected=100,
                      deadline_misses=2, ttff_ms=[300.0], action_to_photon_ms=[50.0, 70.0, 90.0],
                      admitted_at_s=0.1, ended_at_s=3.9)
    r.frame_times_s = [i * 0.04 for i in range(100)]
    return r


def test_the_report_has_every_field_of_traces_md() -> None:
    report = build_report(_outcome([_world(), SessionResult("d1", "director", status="rejected")]))
    for key, subkeys in REQUIRED_FIELDS.items():
        assert key in report
        for sub in subkeys:
            assert sub in report[key], f"{key}.{sub}"
    assert report["sessions"] == {"total": 2, "admitted": 1, "rejected": 1, "failed": 0, "within_objective": 0,
                                  "outside_objective": 1}
    assert report["frames"] == {"received": 100, "expected": 100, "deadline_misses": 2, "miss_rate": 0.02}
    assert report["action_to_photon_ms"] == {"p50": 70.0, "p95": 88.0, "max": 90.0}
    assert report["policy"] == "duty"
    assert report["slo_met"] is False  # 2% misses > 1%
    json.dumps(report)


def test_statistics_without_samples_are_null_not_zero() -> None:
    report = build_report(_outcome([SessionResult("d1", "director", status="rejected")]))
    assert report["segment_ms"] == {"p50": None, "p95": None, "max": None}
    assert report["interrupt_ms"] == {"p50": None, "p95": None}
    assert report["frames"]["miss_rate"] is None


def test_slo_is_met_when_every_admitted_session_is_within_objective() -> None:
    world = _world()
    world.deadline_misses = 1
    report = build_report(_outcome([world]))
    assert report["sessions"]["within_objective"] == 1
    assert report["slo_met"] is True
    assert report["slo"] == Objectives().to_json()


def test_the_table_names_the_headline_numbers() -> None:
    table = format_table(build_report(_outcome([_world()])))
    assert "admitted 1" in table
    assert "deadline misses 2 (2.00%)" in table
    assert "action_to_photon          70      88      90" in table


def test_plots_are_written_as_png(tmp_path: Path) -> None:
    outcome = _outcome([_world(), SessionResult("d1", "director", status="rejected", ended_at_s=0.5)])
    paths = write_plots(outcome, build_report(outcome), tmp_path / "plots")
    assert [p.name for p in paths] == list(PLOT_FILES)
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
