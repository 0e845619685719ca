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


def test_trace_gen_players_makes_every_world_co_played(tmp_path: Path) -> None:
    out, alone, plain = tmp_path / "c.jsonl", tmp_path / "a.jsonl", tmp_path / "p.jsonl"
    args = ("trace-gen", "game", "--sessions", "2", "--duration", "10", "--seed", "4")
    assert trace_gen_cli.run(_parse(*args, "--players", "3", "--out", str(out))) == 0
    trace = load_trace(out)
    assert trace.header.generator is not None and trace.header.generator["players"] == 3
    for key in trace.sessions():
        assert trace.players_of(key) == 3
        seats = {e.fields.get("player", 0) for e in trace.events_of(key) if e.ev == "action"}
        assert seats == {0, 1, 2}
        assert {e.ev for e in trace.events_of(key) if "player" in e.fields} == {"action"}
    # one seat is the trace as it was before co-play existed, byte for byte
    assert trace_gen_cli.run(_parse(*args, "--players", "1", "--out", str(alone))) == 0
    assert trace_gen_cli.run(_parse(*args, "--out", str(plain))) == 0
    assert alone.read_bytes() == plain.read_bytes() and b"player" not in plain.read_bytes()
    owner = load_trace(plain).events
    assert [(e.t, e.ev, e.fields) for e in owner] == [
        (e.t, e.ev, {k: v for k, v in e.fields.items() if k != "players"}) for e in trace.events
        if e.fields.get("player", 0) == 0]


def test_trace_gen_refuses_players_for_directors(tmp_path: Path, capsys: Any) -> None:
    code = trace_gen_cli.run(_parse("trace-gen", "director", "--players", "2", "--out", str(tmp_path / "d")))
    assert code == 2
    assert "co-play is a world's" in capsys.readouterr().err
