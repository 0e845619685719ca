"""The session lifecycle: an ordered enum and the transitions it allows.

created -> active <-> idle -> offloaded -> (active | idle) ; any live state -> closed | failed.
`closed` and `failed` are terminal.
"""

from __future__ import annotations

import enum

from sessiond.errors import InvalidState

__all__ = ["TRANSITIONS", "Lifecycle", "SessionState"]


class SessionState(enum.IntEnum):
    CREATED = 0
    ACTIVE = 1  # generating, or playing to an attached viewer
    IDLE = 2  # nothing demanded: detached, paused, or a director between segments
    OFFLOADED = 3  # idle long enough that its KV sits in host memory
    CLOSED = 4
    FAILED = 5

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def terminal(self) -> bool:
        return self in (SessionState.CLOSED, SessionState.FAILED)


_END = {SessionState.CLOSED, SessionState.FAILED}
TRANSITIONS: dict[SessionState, frozenset[SessionState]] = {
    SessionState.CREATED: frozenset({SessionState.ACTIVE, SessionState.IDLE, *_END}),
    SessionState.ACTIVE: frozenset({SessionState.IDLE, *_END}),
    SessionState.IDLE: frozenset({SessionState.ACTIVE, SessionState.OFFLOADED, *_END}),
    SessionState.OFFLOADED: frozenset({SessionState.ACTIVE, SessionState.IDLE, *_END}),
    SessionState.CLOSED: frozenset(),
    SessionState.FAILED: frozenset(),
}


class Lifecycle:
    """A session's state with guarded transitions."""

    def __init__(self, session_id: str, state: SessionState = SessionState.CREATED) -> None:
        self.session_id = session_id
        self.state = state

    def can(self, to: SessionState) -> bool:
        return to == self.state or to in TRANSITIONS[self.state]

    def to(self, to: SessionState) -> bool:
        """Move to `to`; returns False when already there. Raises InvalidState when not allowed."""
        if to == self.state:
            return False
        if to not in TRANSITIONS[self.state]:
            allowed = "|".join(s.label for s in sorted(TRANSITIONS[self.state])) or "none (terminal)"
            raise InvalidState(self.session_id, f"one leading to {to.label} ({allowed} from here)",
                               self.state.label)
        self.state = to
        return True

    def expect(self, *states: SessionState) -> None:
        if self.state not in states:
            raise InvalidState(self.session_id, "|".join(s.label for s in states), self.state.label)
