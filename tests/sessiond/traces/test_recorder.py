"""Recorded traces from the daemon's event log."""

from __future__ import annotations

from collections.abc import AsyncIterator

from sessiond.store.base import StoredEvent
from sessiond.traces import dump_trace, parse_trace
from sessiond.traces.recorder import TraceRecorder, trace_from_event_stream, trace_from_events

T0 = 1_764_400_000.0


def _log() -> list[StoredEvent]:
    return [
        StoredEvent(T0 - 5, "old", "action", {"seq": 1, "keys": ["w"]}),
        StoredEvent(T0 + 0.0, "sess-x", "create", {"mode": "world", "prompt": "p", "width": 64}),
        StoredEvent(T0 + 0.1, "sess-x", "attach"),
        StoredEvent(T0 + 0.5, "sess-x", "action", {"seq": 1, "ts": 12.0, "keys": ["w"], "mouse": [1, 0]}),
        StoredEvent(T0 + 1.0, "sess-y", "create", {"mode": "director"}),
        StoredEvent(T0 + 1.25, "sess-y", "direct", {"id": 3, "prompt": "go", "seconds": 5.0}),
        StoredEvent(T0 + 2.0, "sess-x", "detach"),
        StoredEvent(T0 + 2.5, "sess-x", "attach"),
        StoredEvent(T0 + 3.0, "sess-x", "close"),
        StoredEvent(T0 + 3.5, "sess-x", "pause"),
    ]


def test_the_event_log_becomes_a_valid_recorded_trace() -> None:
    trace = trace_from_events(_log(), "lab")
    assert trace.header.source == "recorded"
    assert trace.header.recorded_at == "2025-11-29T07:06:40+00:00"
    assert [(e.t, e.s, e.ev) for e in trace.events] == [
        (0.0, "s1", "create"), (0.5, "s1", "action"), (1.0, "s2", "create"), (1.25, "s2", "direct"),
        (2.0, "s1", "detach"), (2.5, "s1", "attach"), (3.0, "s1", "close")]
    assert parse_trace(dump_trace(trace).splitlines()) == trace


def test_only_trace_fields_are_kept_so_the_replayer_assigns_seq_and_id() -> None:
    trace = trace_from_events(_log(), "lab")
    assert trace.events[1].fields == {"keys": ["w"], "mouse": [1, 0]}
    assert trace.events[3].fields == {"prompt": "go", "seconds": 5.0}
    assert trace.events[0].fields == {"mode": "world", "prompt": "p"}


def test_events_a_replay_could_not_reproduce_are_dropped_and_counted() -> None:
    recorder = TraceRecorder()
    for event in _log():
        recorder.add_logged(event)
    assert recorder.stats.kept == 7
    assert recorder.stats.dropped == {"created_before_recording": 1, "attach_while_attached": 1, "after_close": 1}
    assert recorder.to_trace("lab").header.extra["recording"]["dropped"]["after_close"] == 1


def test_invalid_fields_are_dropped_not_recorded() -> None:
    recorder = TraceRecorder()
    recorder.add(T0, "a", "create", {"mode": "world"})
    recorder.add(T0 + 1, "a", "direct", {"seconds": 5})
    assert recorder.stats.dropped == {"invalid_fields": 1}


async def test_the_async_event_log_of_a_store_exports_the_same_trace() -> None:
    async def stream() -> AsyncIterator[StoredEvent]:
        for event in _log():
            yield event

    assert await trace_from_event_stream(stream(), "lab") == trace_from_events(_log(), "lab")
