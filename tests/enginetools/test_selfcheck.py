"""The self-check command compares a device rollout with the CPU eager reference."""

from __future__ import annotations

import json

import pytest

from enginetools.selfcheck import main, selfcheck


def test_selfcheck_on_cpu_matches_the_reference_exactly() -> None:
    report = selfcheck("cpu", "off")
    assert report["ok"] is True
    assert report["max_rel_err"] == 0.0
    # nothing delivered: every chunk back to the rollback floor is still recorded
    assert report["chunks"] == [f"a.latents.{i}" for i in range(6)] + [f"b.latents.{i}" for i in range(7)]


def test_selfcheck_command_prints_json_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--device", "cpu", "--compile", "off"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
