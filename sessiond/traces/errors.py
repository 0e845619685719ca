"""Coded errors of the trace format."""

from __future__ import annotations

__all__ = ["TraceError"]


class TraceError(ValueError):
    """A trace that does not follow docs/traces.md v1.

    ``code`` is one of ``malformed_line``, ``bad_header``, ``unknown_event``, ``invalid_field``,
    ``unsorted``, ``bad_sequence``; ``line`` is the 1-based line number when one applies.
    """

    def __init__(self, code: str, message: str, line: int | None = None) -> None:
        self.code = code
        self.line = line
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{message} [{code}]")
