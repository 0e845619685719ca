"""The co-play extension of the trace format (docs/traces.md, "Co-play"): a world create's `players`
and an event's `player` seat. A recorded co-play log round-trips with each seat's events exact; the
checks name the line and what to change; and a committed trace reads exactly as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessiond.store.base import StoredEvent
from sessiond.traces import TraceError, dump_trace, load_trace, parse_trace
from sessiond.traces.recorder import trace_from_events

ROOT = Path(__file__).resolve().parents[3]
T0 = 1_764_400_000.0
HEADER = '{"format":"sessiond-trace","version":1,"name":"c","source":"synthesized"}'


def _log() -> list[StoredEvent]:
    return [
        StoredEvent(T0, "w", "create", {"mode": "world", "seed": 3, "model": "demo", "players": 3}),
        StoredEvent(T0 + 0.1, "w", "attach", {"media": "raw"}),
        StoredEvent(T0 + 0.5, "w", "action", {"seq": 0, "keys": ["w"]}),
        StoredEvent(T0 + 0.6, "w", "action", {"seq": 0, "keys": ["d"], "mouse": [2.0, 0.0], "player": 1}),
        StoredEvent(T0 + 0.7, "w", "action", {"seq": 0, "keys": [], "axes": [0.5], "player": 2}),
        StoredEvent(T0 + 1.0, "w", "detach"),  # the owner leaves for a while ...
        StoredEvent(T0 + 1.2, "w", "action", {"seq": 1, "keys": ["a"], "player": 1}),  # ... a player plays on
        StoredEvent(T0 + 1.5, "w", "attach", {"media": "raw"}),
        StoredEvent(T0 + 1.6, "w", "action", {"seq": 1, "keys": ["s"], "buttons": 1}),
        StoredEvent(T0 + 2.0, "w", "close", {"reason": "deleted"}),
    ]


def test_a_recorded_coplay_log_round_trips_with_each_seats_events() -> None:
    trace = trace_from_events(_log(), "coplay")
    assert trace.header.extra["recording"] == {"kept": 9, "dropped": {"attach_while_attached": 1}}
    again = parse_trace(dump_trace(trace).splitlines())
    assert again == trace
    assert again.players_of("s1") == 3
    by_seat = {seat: [(e.t, e.ev, e.fields) for e in again.events if e.fields.get("player", 0) == seat]
               for seat in (0, 1, 2)}
    assert by_seat == {
        0: [(0.0, "create", {"mode": "world", "seed": 3, "model": "demo", "players": 3}),
            (0.5, "action", {"keys": ["w"]}), (1.0, "detach", {}), (1.5, "attach", {}),
            (1.6, "action", {"keys": ["s"], "buttons": 1}), (2.0, "close", {})],
        1: [(0.6, "action", {"keys": ["d"], "mouse": [2.0, 0.0], "player": 1}),
            (1.2, "action", {"keys": ["a"], "player": 1})],
        2: [(0.7, "action", {"keys": [], "axes": [0.5], "player": 2})],
    }


@pytest.mark.parametrize(("events", "code", "line", "says"), [
    (['{"t":0,"s":"a","ev":"create","mode":"world"}', '{"t":1,"s":"a","ev":"action","keys":[],"player":1}'],
     "bad_sequence", 3, "has 1 seat(s)"),
    (['{"t":0,"s":"a","ev":"create","mode":"director","players":2}'], "invalid_field", 2, "`players`"),
    (['{"t":0,"s":"a","ev":"create","mode":"world","players":9}'], "invalid_field", 2, "[1, 8]"),
    (['{"t":0,"s":"a","ev":"create","mode":"world","players":2}', '{"t":1,"s":"a","ev":"pause","player":1}'],
     "invalid_field", 3, "only action, detach, attach"),
    (['{"t":0,"s":"a","ev":"create","mode":"world","players":2}', '{"t":1,"s":"a","ev":"detach","player":1}',
      '{"t":2,"s":"a","ev":"action","keys":[],"player":1}'], "bad_sequence", 4, "player 1 of session 'a' is detached"),
    (['{"t":0,"s":"a","ev":"create","mode":"world","players":2}', '{"t":1,"s":"a","ev":"attach","player":1}'],
     "bad_sequence", 3, "already attached"),
    (['{"t":0,"s":"a","ev":"create","mode":"world","players":2}', '{"t":1,"s":"a","ev":"action","keys":[],'
      '"player":true}'], "invalid_field", 3, "`player`"),
])
def test_coplay_defects_name_their_line(events: list[str], code: str, line: int, says: str) -> None:
    with pytest.raises(TraceError) as caught:
        parse_trace([HEADER, *events])
    assert (caught.value.code, caught.value.line) == (code, line)
    assert says in str(caught.value)


def test_a_player_acts_while_the_owner_is_detached_and_seats_detach_on_their_own() -> None:
    trace = parse_trace([HEADER, '{"t":0,"s":"a","ev":"create","mode":"world","players":2}',
                         '{"t":1,"s":"a","ev":"detach"}', '{"t":2,"s":"a","ev":"action","keys":["w"],"player":1}',
                         '{"t":3,"s":"a","ev":"detach","player":1}', '{"t":4,"s":"a","ev":"attach"}',
                         '{"t":5,"s":"a","ev":"attach","player":1}', '{"t":6,"s":"a","ev":"close"}'])
    assert [(e.ev, e.fields.get("player", 0)) for e in trace.events] == [
        ("create", 0), ("detach", 0), ("action", 1), ("detach", 1), ("attach", 0), ("attach", 1), ("close", 0)]


@pytest.mark.parametrize("name", ["smoke-2.jsonl", "game-8.jsonl", "recorded-mixed-4.jsonl"])
def test_a_committed_trace_reads_exactly_as_before(name: str) -> None:
    path = ROOT / "load_traces" / name
    text = path.read_text(encoding="utf-8")
    trace = load_trace(path)
    assert dump_trace(trace) == text  # written back byte for byte
    raw = [json.loads(line) for line in text.splitlines()[1:]]
    assert [(e.t, e.s, e.ev, e.fields) for e in trace.events] == [
        (r.pop("t"), r.pop("s"), r.pop("ev"), r) for r in raw]
    assert all("player" not in e.fields for e in trace.events)
    assert {trace.players_of(s) for s in trace.sessions()} == {1}
