"""A family of traces for admission's acceptance: every shape the issue of capacity names, drawn
afresh from a seed, each regenerable from its header."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.trace_tools.family import SHAPES, FamilyParams, family_traces, think_for_duty
from loadtest.trace_tools.trace_duty import trace_stats
from sessiond.traces import dump_trace, load_trace, parse_trace


def test_a_family_has_one_valid_trace_per_shape_named_for_it_and_its_sessions() -> None:
    traces = family_traces(FamilyParams(seed=11))
    assert [t.header.name.rsplit("-", 1)[0] for t in traces] == list(SHAPES)
    assert len(traces) >= 10
    for trace in traces:
        assert parse_trace(dump_trace(trace).splitlines()) == trace
        assert trace.header.name.endswith(f"-{len(trace.sessions())}")
        assert trace.header.source == "synthesized"
        family = trace.header.generator["family"]
        assert family["seed"] == 11 and trace.header.name.startswith(family["shape"])
        assert trace.duration_s <= 60.0


def test_the_same_seed_gives_the_same_family_and_another_seed_another() -> None:
    assert family_traces(FamilyParams(seed=3)) == family_traces(FamilyParams(seed=3))
    a, b = family_traces(FamilyParams(seed=3)), family_traces(FamilyParams(seed=4))
    assert [t.events for t in a] != [t.events for t in b]


def test_the_shapes_cover_directors_players_mixes_bursts_interrupts_and_returns() -> None:
    for seed in (1, 2, 3):
        by_shape = {t.header.generator["family"]["shape"]: t for t in family_traces(FamilyParams(seed=seed))}
        directors = [by_shape[s] for s in ("directors-busy", "directors-idle", "directors-middling", "directors-wide")]
        counts = [len(t.sessions()) for t in directors]
        assert min(counts) >= 4 and max(counts) <= 16
        assert {e.fields["mode"] for t in directors for e in t.events if e.ev == "create"} == {"director"}
        duties = [trace_stats(t).mean_duty("director") for t in directors]
        assert all(d is not None and 0.15 <= d <= 0.7 for d in duties)
        assert by_shape["directors-busy"].header.generator["think_s_mean"] < 5.0 < \
            by_shape["directors-idle"].header.generator["think_s_mean"]
        for name in ("players-few", "players-many"):
            assert {e.fields["mode"] for e in by_shape[name].events if e.ev == "create"} == {"world"}
        assert {e.fields["mode"] for e in by_shape["mixed"].events if e.ev == "create"} == {"world", "director"}
        for name in ("burst-directors", "burst-mixed"):
            creates = [e.t for e in by_shape[name].events if e.ev == "create"]
            assert max(creates) - min(creates) <= 2.0
        interrupting = by_shape["directors-interrupting"]
        directs = sum(1 for e in interrupting.events if e.ev == "direct")
        assert sum(1 for e in interrupting.events if e.ev == "interrupt") >= directs // 4
        back = by_shape["coming-back"]
        assert sum(1 for e in back.events if e.ev == "detach") == sum(1 for e in back.events if e.ev == "attach") >= 1


def test_think_time_follows_the_duty_asked_for() -> None:
    assert think_for_duty(0.5, 5.0) == 5.0
    assert think_for_duty(0.2, 5.0) == 20.0
    with pytest.raises(ValueError, match="duty must be in"):
        think_for_duty(1.0, 5.0)


def _trace_gen(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessiond.cli", "trace-gen", *args], capture_output=True, text=True,
                          timeout=60)


def test_trace_gen_family_writes_the_folder_and_prints_its_seed(tmp_path: Path) -> None:
    done = _trace_gen("family", "--out", str(tmp_path / "fam"), "--seed", "42", "--duration", "30")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"family seed 42: {len(SHAPES)} traces of 30 s in {tmp_path / 'fam'}"
    written = sorted((tmp_path / "fam").glob("*.jsonl"))
    assert [load_trace(p) for p in written] == sorted(family_traces(FamilyParams(seed=42, duration_s=30.0)),
                                                       key=lambda t: t.header.name)
    fresh = _trace_gen("family", "--out", str(tmp_path / "new"))
    seed = int(fresh.stdout.split()[2].rstrip(":"))
    assert load_trace(next((tmp_path / "new").glob("mixed-*.jsonl"))).header.generator["family"]["seed"] == seed


@pytest.mark.parametrize(("args", "message"), [
    (("family",), "family writes a folder of traces: give --out DIR"),
    (("family", "--out", "x", "--duration", "10"), "a family's traces need --duration >= 20 s, got 10"),
    (("family", "--out", "x", "--param", "sessions=3"), "family draws its own parameters"),
])
def test_trace_gen_family_refuses_what_does_not_apply(args: tuple[str, ...], message: str) -> None:
    done = _trace_gen(*args)
    assert done.returncode == 2 and message in done.stderr
