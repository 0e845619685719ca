"""Coded errors of the demo world model: each names what to change."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

__all__ = ["DemoError", "exit_code"]


class DemoError(ValueError):
    """A bad input to the demo world, trainer or evaluator. ``code`` is stable, the message says what to change."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def exit_code(run: Callable[[argparse.Namespace], object], args: argparse.Namespace) -> int:
    """A command's exit status: 0 when `run(args)` returns, 2 (with the error on stderr) on a DemoError."""
    try:
        run(args)
    except DemoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
