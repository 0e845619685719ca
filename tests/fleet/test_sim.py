"""The fleet simulator at a small scale: every session placed, failures noticed after the record
TTL and re-placed by the real failover code, the command writes its summary and plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.sim.__main__ import main
from fleet.sim.run import SimConfig, simulate


def _small(**kw: object) -> SimConfig:
    base: dict[str, object] = dict(workers=32, sessions=500, gpus_per_host=4, hosts_per_rack=2, gateways=2,
                                   arrival_s=30, after_s=40, worker_failure_after_s=5, rack_failure_after_s=20,
                                   rtt_ask_s=0.0, rtt_op_s=0.0)
    base.update(kw)
    return SimConfig(**base)  # type: ignore[arg-type]


def test_failures_are_back_after_ttl_plus_resume() -> None:
    result = simulate(_small())
    summary = result.summary()
    assert summary["placed"] + summary["refused"] == 500 and summary["refused"] == 0
    worker, rack = result.failover.values()
    assert rack["sessions"] > worker["sessions"] > 0
    for event in (worker, rack):
        assert event["never_back"] == 0 and event["back"] == event["sessions"]
        assert event["within_objective"] == event["sessions"]
        # noticed when its record expires (ttl 3 s), then resumed (2 s), plus the code's own time
        assert 5.0 <= event["max_s"] < 5.5
    assert len(result.timeline) == len(result.ops_per_s) == 70
    assert result.timeline[-1]["out"] == 0.0


def test_an_overfull_fleet_refuses_and_strands_what_it_cannot_hold() -> None:
    result = simulate(_small(sessions=900))
    assert result.refused > 0
    assert max(result.asks) > 1  # a refusal sent some creates on to the next worker by headroom
    rack = result.failover[next(k for k in result.failover if k.startswith("rack"))]
    assert rack["never_back"] > 0  # the survivors are full: those sessions wait


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="must be a multiple of gpus_per_host"):
        SimConfig(workers=30, gpus_per_host=8)
    with pytest.raises(ValueError, match="must fill more than one rack of 40"):
        SimConfig(workers=40, gpus_per_host=8, hosts_per_rack=5)


def test_the_command_writes_summary_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--workers", "16", "--sessions", "200", "--arrival-s", "10", "--gpus-per-host", "4",
                 "--hosts-per-rack", "1", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["failover.png", "placement_latency.png", "redis_ops.png",
                                                          "summary.json", "worker_load.png"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["placed"] == 200 and summary["config"]["workers"] == 16
    assert "t=0s: " in capsys.readouterr().out
