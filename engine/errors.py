"""Coded engine errors: each says what to change."""

from __future__ import annotations

__all__ = [
    "ActionError",
    "ConfigError",
    "EngineError",
    "SessionStateError",
    "WeightsError",
]


class EngineError(Exception):
    """Base class: `code` is a stable machine-readable string, the message says what to change."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class ConfigError(EngineError):
    """Unknown model name or an inconsistent model configuration."""


class WeightsError(EngineError):
    """A checkpoint whose keys, shapes or dtypes do not fit the model."""


class ActionError(EngineError):
    """Action conditioning outside the model's declared action space."""


class SessionStateError(EngineError):
    """An operation that the session's current state does not allow."""
