"""Coded errors of admission and the cost model."""

from __future__ import annotations

__all__ = ["AdmissionConfigError", "CostModelError", "UnknownSession"]


class CostModelError(RuntimeError):
    """The cost model cannot answer: ``code`` is ``uncalibrated`` or ``invalid_sample``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} [{code}]")
        self.code = code


class AdmissionConfigError(ValueError):
    """A bad admission setting; the message names the option and what to change."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"admission option `{option}`: {message}")
        self.option = option


class UnknownSession(KeyError):
    """A duty-tracker call for a session admission does not know (never admitted, or released)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} is not tracked for admission: admit it first, or it was released")
        self.session_id = session_id
