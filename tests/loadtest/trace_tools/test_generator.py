"""Synthesized traces follow their stated behaviour parameters."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from loadtest.trace_tools.generator import DirectorParams, GameParams, director_trace, game_trace, mixed_trace
from loadtest.trace_tools.standard import standard_traces
from sessiond.traces import dump_trace, load_trace, parse_trace

ROOT = Path(__file__).resolve().parents[3]


def test_a_director_trace_is_synthesized_with_its_parameters_in_the_header() -> None:
    trace = director_trace(DirectorParams(sessions=3, duration_s=60.0, seed=5))
    assert trace.header.source == "synthesized"
    assert trace.header.generator is not None
    assert trace.header.generator["kind"] == "director"
    assert trace.header.generator["sessions"] == 3
    assert trace.header.generator["segment_s"] == 5.0
    assert trace.sessions() == sorted(trace.sessions(), key=lambda s: next(e.t for e in trace.events if e.s == s))
    assert sorted(trace.sessions()) == ["d1", "d2", "d3"]


def test_director_sessions_direct_5_s_segments_and_close_within_the_duration() -> None:
    trace = director_trace(DirectorParams(sessions=4, duration_s=90.0, seed=1))
    for key in trace.sessions():
        events = trace.events_of(key)
        assert events[0].ev == "create"
        assert events[0].fields["mode"] == "director"
        assert events[-1].ev == "close"
        assert events[-1].t <= 90.0
        directs = [e for e in events if e.ev == "direct"]
        assert directs
        assert {e.fields["seconds"] for e in directs} == {5.0}


def test_director_think_time_separates_uninterrupted_segments() -> None:
    p = DirectorParams(sessions=6, duration_s=200.0, seed=2, interrupt_prob=0.0)
    trace = director_trace(p)
    for key in trace.sessions():
        times = [e.t for e in trace.events_of(key) if e.ev == "direct"]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert all(g >= p.segment_s + p.think_s_min - 1e-3 for g in gaps)


def test_the_same_seed_gives_the_same_trace() -> None:
    p = GameParams(sessions=2, duration_s=20.0, seed=9)
    assert dump_trace(game_trace(p)) == dump_trace(game_trace(p))
    assert dump_trace(game_trace(p)) != dump_trace(game_trace(GameParams(sessions=2, duration_s=20.0, seed=10)))


def test_game_actions_stream_at_30_to_60_hz_within_bursts() -> None:
    trace = game_trace(GameParams(sessions=3, duration_s=30.0, seed=3))
    for key in trace.sessions():
        times = [e.t for e in trace.events_of(key) if e.ev == "action"]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        in_burst = [g for g in gaps if g < 0.1]
        assert len(in_burst) > 0.9 * len(gaps)
        assert min(in_burst) >= 0.9 / 60.0 - 1e-4
        assert max(in_burst) <= 1.1 / 30.0 + 1e-4


def test_game_traces_pause_and_resume_in_pairs() -> None:
    trace = game_trace(GameParams(sessions=4, duration_s=60.0, menu_pause_prob=1.0, seed=4))
    for key in trace.sessions():
        kinds = [e.ev for e in trace.events_of(key) if e.ev in ("pause", "resume")]
        assert kinds == ["pause", "resume"] * (len(kinds) // 2)


def test_a_mixed_trace_holds_both_populations() -> None:
    trace = mixed_trace(DirectorParams(sessions=2, duration_s=30.0), GameParams(sessions=3, duration_s=30.0))
    modes = {e.s: e.fields["mode"] for e in trace.events if e.ev == "create"}
    assert sorted(modes.items()) == [("d1", "director"), ("d2", "director"), ("g1", "world"), ("g2", "world"),
                                     ("g3", "world")]
    assert trace.header.generator is not None
    assert trace.header.generator["kind"] == "mixed"


def test_generated_traces_pass_validation() -> None:
    trace = mixed_trace(DirectorParams(sessions=3, seed=11), GameParams(sessions=3, seed=12))
    assert parse_trace(dump_trace(trace).splitlines()) == trace


@pytest.mark.slow
def test_the_committed_synthesized_traces_are_what_the_generator_makes() -> None:
    for trace in standard_traces():
        path = ROOT / "load_traces" / f"{trace.header.name}.jsonl"
        assert path.read_text(encoding="utf-8") == dump_trace(trace), f"regenerate {path.name}"
        assert load_trace(path).header.source == "synthesized"
