"""`sessiond trace-gen`: a synthesized trace from behaviour parameters, or a clear refusal."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from loadtest.trace_tools import trace_gen_cli
from sessiond.traces import load_trace


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    trace_gen_cli.add_parser(sub, "trace-gen")
    return parser.parse_args(list(argv))


def test_trace_gen_writes_a_synthesized_trace_with_its_parameters(tmp_path: Path) -> None:
    out = tmp_path / "g.jsonl"
    code = trace_gen_cli.run(_parse("trace-gen", "game", "--sessions", "2", "--duration", "10", "--seed", "4",
                                 "--param", "rate_hz_min=40", "--out", str(out)))
    assert code == 0
    trace = load_trace(out)
    assert trace.header.generator is not None
    assert (trace.header.generator["rate_hz_min"], trace.header.generator["sessions"]) == (40.0, 2)


def test_trace_gen_names_an_unknown_parameter(tmp_path: Path, capsys: Any) -> None:
    code = trace_gen_cli.run(_parse("trace-gen", "director", "--param", "mood=happy", "--out", str(tmp_path / "d")))
    assert code == 2
    assert "unknown parameter 'mood'" in capsys.readouterr().err
