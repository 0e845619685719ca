"""`sessiond replay` and `sessiond replay-compare`: bad input is a clear message and exit code 2."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path
from typing import Any

import pytest

from loadtest.replay import compare_cli, replay_cli
from loadtest.replay.session_runner import SessionRunner
from sessiond.config import ServeConfig


def _args(module: Any, name: str, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    module.add_parser(sub, name)
    return parser.parse_args([name, *argv])


def test_a_malformed_trace_is_refused_with_its_line_number(tmp_path: Path, capsys: Any) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"format": "sessiond-trace", "version": 1, "name": "b", "source": "recorded"}\n{oops\n')
    assert replay_cli.run(_args(replay_cli, "replay", str(trace), "--url", "http://127.0.0.1:9")) == 2
    assert "line 2: not valid JSON" in capsys.readouterr().err


def test_a_missing_trace_file_is_named(tmp_path: Path, capsys: Any) -> None:
    assert replay_cli.run(_args(replay_cli, "replay", str(tmp_path / "none.jsonl"))) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_bad_speed_or_objective_is_refused(capsys: Any) -> None:
    trace = str(Path(__file__).resolve().parents[3] / "load_traces" / "smoke-2.jsonl")
    assert replay_cli.run(_args(replay_cli, "replay", trace, "--speed", "0")) == 2
    assert "--speed must be > 0" in capsys.readouterr().err
    assert replay_cli.run(_args(replay_cli, "replay", trace, "--miss-rate", "2")) == 2
    assert "world_deadline_miss" in capsys.readouterr().err


def test_compare_names_an_unknown_policy(capsys: Any) -> None:
    assert compare_cli.run(_args(compare_cli, "replay-compare", "x.jsonl", "--policies", "duty,lottery")) == 2
    assert "duty, one-per-gpu, fifo" in capsys.readouterr().err


@pytest.mark.slow
def test_compare_names_an_unknown_model_with_its_code(capsys: Any) -> None:
    trace = str(Path(__file__).resolve().parents[3] / "load_traces" / "smoke-2.jsonl")
    assert compare_cli.run(_args(compare_cli, "replay-compare", trace, "--model", "nope", "--device", "cpu")) == 1
    err = capsys.readouterr().err
    assert err.startswith("replay-compare: sessiond serve at http://127.0.0.1:")
    assert "will not become ready: RuntimeError: cannot build model 'nope' on cpu: [unknown_model]" in err


def test_a_replayed_create_outwaits_the_daemons_admission_wait() -> None:
    # a client that gives up first counts the session as failed where the daemon would say 503:
    # the H200 comparison's one-per-gpu waiters did, with both at 30 s
    client_timeout = inspect.signature(SessionRunner.__init__).parameters["timeout_s"].default
    assert ServeConfig().admission_wait_s + 5.0 <= client_timeout
