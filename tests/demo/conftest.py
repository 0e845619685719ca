"""Tests of a package above the engine run tiny models like the engine's own: one torch thread."""

from tests.engine.conftest import _one_torch_thread

__all__ = ["_one_torch_thread"]  # autouse
