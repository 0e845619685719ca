"""`ConnectWatch`: a created session no client connects within the bound is named for release."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from sessiond.runtime.unconnected import ConnectWatch
from sessiond.session.lifecycle import SessionState


@dataclass
class _Out:
    sent: int = 0


@dataclass
class _Record:
    created_at: float


@dataclass
class _Session:
    record: _Record
    connection: Any = None
    out: _Out = field(default_factory=_Out)
    state: SessionState = SessionState.IDLE


def test_a_session_never_connected_is_named_once_its_bound_from_creation_passes() -> None:
    now = [100.0]
    watch = ConnectWatch(30.0, clock=lambda: now[0])
    sessions = {"a": _Session(_Record(99.5)), "b": _Session(_Record(100.0))}
    assert watch.expired(sessions) == []
    now[0] = 129.5
    assert watch.expired(sessions) == ["a"]  # created at 99.5: due at 129.5
    now[0] = 130.0
    assert watch.expired(sessions) == ["a", "b"]


def test_a_connected_session_is_never_named_even_after_it_disconnects() -> None:
    now = [0.0]
    watch = ConnectWatch(30.0, clock=lambda: now[0])
    session = _Session(_Record(0.0))
    sessions = {"a": session}
    assert watch.expired(sessions) == []
    session.connection = object()
    now[0] = 10.0
    assert watch.expired(sessions) == []
    session.connection = None
    now[0] = 100.0
    assert watch.expired(sessions) == []


def test_a_session_that_sent_frames_or_ended_is_not_named() -> None:
    now = [1000.0]
    watch = ConnectWatch(5.0, clock=lambda: now[0])
    sessions = {"sent": _Session(_Record(1000.0), out=_Out(sent=12)),
                "closed": _Session(_Record(1000.0), state=SessionState.CLOSED)}
    now[0] = 2000.0
    assert watch.expired(sessions) == []


def test_a_session_first_seen_long_after_its_creation_gets_the_bound_from_then() -> None:
    now = [500.0]
    watch = ConnectWatch(30.0, clock=lambda: now[0])
    sessions = {"resumed": _Session(_Record(10.0))}  # created before a restart
    assert watch.expired(sessions) == []
    now[0] = 529.9
    assert watch.expired(sessions) == []
    now[0] = 530.0
    assert watch.expired(sessions) == ["resumed"]


def test_a_bound_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="unconnected_close_s must be > 0 seconds, got 0"):
        ConnectWatch(0.0)
