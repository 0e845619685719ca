"""Trace format v1 (docs/traces.md): what parses, and the line number of what does not."""

from __future__ import annotations

import json

import pytest

from sessiond.traces import TraceError, dump_trace, parse_trace

HEADER = json.dumps({"format": "sessiond-trace", "version": 1, "name": "t", "source": "synthesized"})


def _lines(*events: dict) -> list[str]:
    return [HEADER, *(json.dumps(e) for e in events)]


CREATE = {"t": 0.0, "s": "a", "ev": "create", "mode": "director", "prompt": "x"}


def _error(lines: list[str]) -> TraceError:
    with pytest.raises(TraceError) as info:
        parse_trace(lines)
    return info.value


def test_a_valid_trace_parses_into_header_and_events() -> None:
    trace = parse_trace(_lines(CREATE, {"t": 1.5, "s": "a", "ev": "direct", "prompt": "go", "seconds": 5},
                               {"t": 2.0, "s": "a", "ev": "close"}))
    assert trace.header.name == "t"
    assert trace.header.source == "synthesized"
    assert [(e.t, e.ev) for e in trace.events] == [(0.0, "create"), (1.5, "direct"), (2.0, "close")]
    assert trace.events[1].fields == {"prompt": "go", "seconds": 5}


def test_a_malformed_line_fails_with_its_line_number() -> None:
    err = _error([*_lines(CREATE), '{"t": 1.0, "s": "a", "ev": '])
    assert err.line == 3
    assert err.code == "malformed_line"
    assert str(err).startswith("line 3: not valid JSON")


def test_a_line_that_is_not_an_object_fails_with_its_line_number() -> None:
    err = _error([*_lines(CREATE), "[1, 2]"])
    assert (err.line, err.code) == (3, "malformed_line")


def test_an_unknown_ev_is_an_error_with_its_line_number_not_a_skip() -> None:
    err = _error(_lines(CREATE, {"t": 1.0, "s": "a", "ev": "teleport"}))
    assert (err.line, err.code) == (3, "unknown_event")
    assert "'teleport'" in str(err)


@pytest.mark.parametrize(("header", "names"), [
    ({"format": "other", "version": 1, "name": "t", "source": "recorded"}, "format"),
    ({"format": "sessiond-trace", "version": 2, "name": "t", "source": "recorded"}, "version"),
    ({"format": "sessiond-trace", "version": 1, "name": "", "source": "recorded"}, "name"),
    ({"format": "sessiond-trace", "version": 1, "name": "t", "source": "live"}, "source"),
    ({"format": "sessiond-trace", "version": 1, "name": "t", "source": "recorded", "recorded_at": "yesterday"},
     "recorded_at"),
    ({"format": "sessiond-trace", "version": 1, "name": "t", "source": "synthesized", "generator": [1]},
     "generator"),
])
def test_a_bad_header_names_the_header_field(header: dict, names: str) -> None:
    err = _error([json.dumps(header)])
    assert (err.line, err.code) == (1, "bad_header")
    assert f"`{names}`" in str(err)


def test_an_empty_trace_has_no_header() -> None:
    assert _error([]).code == "bad_header"


def test_events_out_of_time_order_are_rejected() -> None:
    err = _error(_lines(CREATE, {"t": 2.0, "s": "a", "ev": "pause"}, {"t": 1.0, "s": "a", "ev": "resume"}))
    assert (err.line, err.code) == (4, "unsorted")


def test_a_session_must_begin_with_create() -> None:
    err = _error(_lines({"t": 0.0, "s": "b", "ev": "action", "keys": ["w"]}))
    assert (err.line, err.code) == (2, "bad_sequence")


def test_no_event_may_follow_close() -> None:
    err = _error(_lines(CREATE, {"t": 1.0, "s": "a", "ev": "close"}, {"t": 2.0, "s": "a", "ev": "pause"}))
    assert (err.line, err.code) == (4, "bad_sequence")


def test_a_detached_session_only_attaches_or_closes() -> None:
    err = _error(_lines(CREATE, {"t": 1.0, "s": "a", "ev": "detach"},
                        {"t": 2.0, "s": "a", "ev": "direct", "prompt": "p"}))
    assert (err.line, err.code) == (4, "bad_sequence")


@pytest.mark.parametrize(("event", "field"), [
    ({"t": 0.0, "s": "a", "ev": "create", "mode": "movie"}, "mode"),
    ({"t": 0.0, "s": "a", "ev": "create", "mode": "world", "transport": "carrier-pigeon"}, "transport"),
    ({"t": 0.0, "s": "a", "ev": "create", "mode": "world", "seed": 1.5}, "seed"),
])
def test_a_bad_create_field_is_named(event: dict, field: str) -> None:
    err = _error(_lines(event))
    assert (err.line, err.code) == (2, "invalid_field")
    assert f"`{field}`" in str(err)


@pytest.mark.parametrize(("event", "field"), [
    ({"t": 1.0, "s": "a", "ev": "direct", "seconds": 5}, "prompt"),
    ({"t": 1.0, "s": "a", "ev": "direct", "prompt": "p", "seconds": 0}, "seconds"),
    ({"t": 1.0, "s": "a", "ev": "action", "keys": "w"}, "keys"),
    ({"t": 1.0, "s": "a", "ev": "action", "keys": [], "mouse": [1]}, "mouse"),
    ({"t": -1.0, "s": "a", "ev": "pause"}, "t"),
    ({"t": 1.0, "s": "", "ev": "pause"}, "s"),
])
def test_a_bad_event_field_is_named_with_its_line(event: dict, field: str) -> None:
    err = _error(_lines(CREATE, event))
    assert (err.line, err.code) == (3, "invalid_field")
    assert f"`{field}`" in str(err)


def test_blank_lines_are_ignored_but_keep_the_numbering() -> None:
    err = _error([HEADER, "", json.dumps(CREATE), "", "nonsense"])
    assert err.line == 5


def test_unknown_optional_fields_survive_a_round_trip() -> None:
    header = json.dumps({"format": "sessiond-trace", "version": 1, "name": "t", "source": "recorded",
                         "recorded_at": "2026-11-29T14:00:00+00:00", "site": "lab"})
    lines = [header, json.dumps({**CREATE, "note": "hi"})]
    trace = parse_trace(lines)
    again = parse_trace(dump_trace(trace).splitlines())
    assert again == trace
    assert again.header.extra == {"site": "lab"}
    assert again.events[0].fields["note"] == "hi"
