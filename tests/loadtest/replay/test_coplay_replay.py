"""A two-player trace replayed against a live daemon process (the demo model, CPU, `--record`), as
an operator runs it: the replay invites the second player and sends each seat's actions on its own
connection; the report has a row per player whose applied seq is that player's last action (the
frames' `players[k]`); and the trace the daemon records keeps each seat's actions exactly."""

from __future__ import annotations

from typing import Any

import pytest
import pytest_asyncio

from loadtest.replay.report import build_report, format_table
from loadtest.replay.runner import run_replay
from sessiond.traces import Trace, TraceEvent, TraceHeader, load_trace
from tests.conftest import daemon_process, off_loop

pytestmark = pytest.mark.slow  # a demo daemon process and a trace replayed in real time

ACTIONS = 16  # per seat, 10 a second


def _coplay_trace() -> Trace:
    events = [TraceEvent(0.0, "s1", "create", {"mode": "world", "seed": 7, "players": 2})]
    for i in range(ACTIONS):
        events.append(TraceEvent(round(1.0 + 0.1 * i, 3), "s1", "action", {"keys": ["w"] if i % 2 else []}))
        events.append(TraceEvent(round(1.05 + 0.1 * i, 3), "s1", "action",
                                 {"keys": ["d"], "mouse": [float(i), -1.0], "player": 1}))
    events.append(TraceEvent(6.0, "s1", "close", {}))  # 3 s after the last action: both applied by then
    return Trace(TraceHeader("coplay-2", "synthesized", description="two players, one world"), tuple(events))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, dict[str, Any], Trace]:
    trace = _coplay_trace()
    path = tmp_path_factory.mktemp("recorded") / "recorded-coplay.jsonl"
    async with off_loop(daemon_process("--model", "demo", "--policy", "kv", "--record", str(path))) as (url, _):
        outcome = await run_replay(trace, url)
    return trace, build_report(outcome), load_trace(path)


def test_the_report_has_a_row_per_player_with_its_own_applied_seq(replayed: tuple[Trace, dict[str, Any], Trace]
                                                                  ) -> None:
    _, report, _ = replayed
    assert (report["sessions"]["admitted"], report["sessions"]["failed"]) == (1, 0)
    (row,) = report["per_session"]
    assert row["server_errors"] == {}
    seats = row["players"]
    assert [(s["player"], s["actions_sent"], s["last_seq_sent"], s["applied_seq"], s["actions_unresolved"])
            for s in seats] == [(0, ACTIONS, ACTIONS - 1, ACTIONS - 1, 0), (1, ACTIONS, ACTIONS - 1, ACTIONS - 1, 0)]
    assert all(s["frames_received"] > 0 and s["action_to_photon_ms"]["p50"] is not None for s in seats)
    table = format_table(report)
    assert f"s1 player 1: actions {ACTIONS}  applied seq {ACTIONS - 1}/{ACTIONS - 1}" in table


def test_the_recorded_trace_keeps_each_seats_actions(replayed: tuple[Trace, dict[str, Any], Trace]) -> None:
    trace, _, recorded = replayed
    (key,) = recorded.sessions()
    assert recorded.events_of(key)[0].fields["players"] == 2
    assert recorded.players_of(key) == 2
    for seat in (0, 1):
        want = [e.fields for e in trace.events if e.ev == "action" and e.fields.get("player", 0) == seat]
        got = [e.fields for e in recorded.events if e.ev == "action" and e.fields.get("player", 0) == seat]
        assert got == want, seat
    assert [e.ev for e in recorded.events] == [e.ev for e in trace.events]
