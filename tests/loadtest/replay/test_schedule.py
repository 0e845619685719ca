"""When replayed events go out: paced by trace time, or saturating."""

from __future__ import annotations

import pytest

from loadtest.replay.schedule import session_steps
from sessiond.traces import Trace, TraceEvent, TraceHeader


def _trace() -> Trace:
    events = (
        TraceEvent(1.0, "d", "create", {"mode": "director"}),
        TraceEvent(2.0, "w", "create", {"mode": "world"}),
        TraceEvent(3.0, "d", "direct", {"prompt": "a"}),
        TraceEvent(3.5, "w", "action", {"keys": ["w"]}),
        TraceEvent(5.0, "d", "interrupt", {}),
        TraceEvent(20.0, "d", "direct", {"prompt": "b"}),
        TraceEvent(30.0, "d", "close", {}),
        TraceEvent(30.0, "w", "close", {}),
    )
    return Trace(TraceHeader("t", "synthesized"), events)


def test_paced_events_go_out_at_trace_time_over_speed() -> None:
    steps = session_steps(_trace(), "d", speed=2.0)
    assert [s.at_s for s in steps] == [0.5, 1.5, 2.5, 10.0, 15.0]
    assert not any(s.after_segment for s in steps)


def test_saturating_directors_drop_think_time_and_wait_for_their_segment() -> None:
    steps = session_steps(_trace(), "d", mode="saturating")
    assert [(s.event.ev, s.gap_s, s.after_segment) for s in steps] == [
        ("create", 0.0, False), ("direct", 0.0, False), ("interrupt", 2.0, False), ("direct", 0.0, True),
        ("close", 10.0, False)]


def test_saturating_world_sessions_start_at_once_and_keep_their_pacing() -> None:
    steps = session_steps(_trace(), "w", mode="saturating", speed=0.5)
    assert [(s.event.ev, s.gap_s) for s in steps] == [("create", 0.0), ("action", 3.0), ("close", 53.0)]


def test_bad_speed_or_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="speed"):
        session_steps(_trace(), "d", speed=0)
    with pytest.raises(ValueError, match="mode"):
        session_steps(_trace(), "d", mode="bursty")
