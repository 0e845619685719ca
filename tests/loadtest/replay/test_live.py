"""A replay of a small trace against a live daemon process (tiny engine, CPU), as an operator runs
it: the report has every field of docs/traces.md, no frame of an old generation follows an ack, and the
trace the daemon records (`serve --record`) reproduces the replayed event timing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from loadtest.replay.report import REQUIRED_FIELDS, build_report
from loadtest.replay.runner import run_replay
from sessiond.traces import Trace, dump_trace, load_trace, parse_trace
from tests.conftest import daemon_process, off_loop

pytestmark = pytest.mark.slow  # a daemon process and a trace replayed in real time

ROOT = Path(__file__).resolve().parents[3]
TIMING_TOLERANCE_S = 0.25  # recorded (server receive) vs trace time of every event, same session;
# client and daemon are separate processes (measured: 4 ms worst of 601 events); an in-process
# daemon shared the client's GIL on 2 cores and once drifted 0.505 s in a fresh-clone CI run


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, dict[str, Any], Trace]:
    trace = load_trace(ROOT / "load_traces" / "smoke-2.jsonl")
    path = tmp_path_factory.mktemp("recorded") / "recorded-smoke.jsonl"
    async with off_loop(daemon_process("--record", str(path))) as (url, _):
        outcome = await run_replay(trace, url)
    recorded = load_trace(path)  # written by the daemon at its (graceful) shutdown
    assert len(recorded.sessions()) == 2
    return trace, build_report(outcome), recorded


def test_the_live_report_has_every_field_of_traces_md(replayed: tuple[Trace, dict[str, Any], Trace]) -> None:
    _, report, _ = replayed
    for key, subkeys in REQUIRED_FIELDS.items():
        assert key in report
        for sub in subkeys:
            assert sub in report[key], f"{key}.{sub}"
    assert report["sessions"]["total"] == 2
    assert report["sessions"]["admitted"] == 2
    assert report["frames"]["received"] > 0
    assert report["interrupt_ms"]["p50"] is not None
    assert len(report["per_session"]) == 2


def test_no_frame_of_an_old_generation_arrives_after_an_ack(replayed: tuple[Trace, dict[str, Any], Trace]) -> None:
    _, report, _ = replayed
    assert report["stale_frames_after_ack"] == 0
    assert report["pts_errors"] == 0


def test_the_recorded_trace_is_a_valid_recorded_trace(replayed: tuple[Trace, dict[str, Any], Trace]) -> None:
    _, _, recorded = replayed
    assert recorded.header.source == "recorded"
    assert parse_trace(dump_trace(recorded).splitlines()) == recorded


def test_recording_then_replaying_reproduces_the_event_timing(replayed: tuple[Trace, dict[str, Any], Trace]
                                                              ) -> None:
    trace, _, recorded = replayed
    by_mode = {trace.events_of(s)[0].fields["mode"]: trace.events_of(s) for s in trace.sessions()}
    rec_by_mode = {recorded.events_of(s)[0].fields["mode"]: recorded.events_of(s) for s in recorded.sessions()}
    t0, r0 = trace.events[0].t, recorded.events[0].t
    for mode, original in by_mode.items():
        again = rec_by_mode[mode]
        assert [e.ev for e in again] == [e.ev for e in original]
        errors = [abs((b.t - r0) - (a.t - t0)) for a, b in zip(original, again, strict=True)]
        worst = max(range(len(errors)), key=errors.__getitem__)
        assert errors[worst] <= TIMING_TOLERANCE_S, (
            f"{mode}: worst timing error {errors[worst]:.3f} s at event {worst} ({original[worst].ev})"
        )
        assert [e.fields for e in again if e.ev != "create"] == [e.fields for e in original if e.ev != "create"]
