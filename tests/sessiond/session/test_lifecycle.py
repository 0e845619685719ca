"""The session lifecycle: ordered states, guarded transitions that name expected and actual."""

from __future__ import annotations

import pytest

from sessiond.errors import InvalidState
from sessiond.session.lifecycle import Lifecycle, SessionState


def test_states_are_ordered_as_the_design_says() -> None:
    assert [s.label for s in sorted(SessionState)] == ["created", "active", "idle", "offloaded", "closed", "failed"]


def test_active_and_idle_alternate_and_idle_offloads() -> None:
    life = Lifecycle("s_1")
    for to in (SessionState.ACTIVE, SessionState.IDLE, SessionState.ACTIVE, SessionState.IDLE,
               SessionState.OFFLOADED, SessionState.ACTIVE):
        assert life.to(to) is True
    assert life.state == SessionState.ACTIVE


def test_a_transition_to_the_same_state_is_a_no_op() -> None:
    life = Lifecycle("s_1", SessionState.IDLE)
    assert life.to(SessionState.IDLE) is False


def test_active_cannot_be_offloaded_directly_and_the_error_names_both_states() -> None:
    life = Lifecycle("s_9", SessionState.ACTIVE)
    with pytest.raises(InvalidState) as info:
        life.to(SessionState.OFFLOADED)
    assert (info.value.session_id, info.value.actual) == ("s_9", "active")
    assert "offloaded" in info.value.expected and "idle" in info.value.expected


@pytest.mark.parametrize("end", [SessionState.CLOSED, SessionState.FAILED])
def test_closed_and_failed_are_terminal(end: SessionState) -> None:
    life = Lifecycle("s_1", SessionState.IDLE)
    life.to(end)
    assert end.terminal
    with pytest.raises(InvalidState, match="terminal"):
        life.to(SessionState.ACTIVE)


def test_expect_guards_an_operation() -> None:
    life = Lifecycle("s_1", SessionState.OFFLOADED)
    life.expect(SessionState.IDLE, SessionState.OFFLOADED)
    with pytest.raises(InvalidState, match="expected state active"):
        life.expect(SessionState.ACTIVE)
