"""Coded errors of the daemon. Each names what is wrong and what to change."""

from __future__ import annotations

__all__ = ["InvalidState", "ServeConfigError", "StoreUnavailable"]


class ServeConfigError(ValueError):
    """Bad configuration (flags or --config JSON); the message says which option to change."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"config option `{option}`: {message}")
        self.option = option


class InvalidState(RuntimeError):
    """A lifecycle transition that the session's current state does not allow."""

    def __init__(self, session_id: str, expected: str, actual: str) -> None:
        super().__init__(f"session {session_id}: expected state {expected}, but it is {actual}")
        self.session_id = session_id
        self.expected = expected
        self.actual = actual


class StoreUnavailable(RuntimeError):
    """The session store cannot be reached (e.g. Redis is down)."""
