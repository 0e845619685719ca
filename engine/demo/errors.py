"""Coded errors of the demo world model: each names what to change."""

from __future__ import annotations

__all__ = ["DemoError"]


class DemoError(ValueError):
    """A bad input to the demo world, trainer or evaluator. ``code`` is stable, the message says what to change."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
