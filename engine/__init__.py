"""Engine core: a causal chunked world model stepped by the caller. Imports nothing of ours.

The package's public names are the engine's contract, listed once in `engine.api`."""

from engine import api
from engine.api import *  # noqa: F403

__all__ = api.__all__
