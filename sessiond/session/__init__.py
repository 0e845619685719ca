"""Sessions: state, action timeline, output stream, and the connection port."""

from __future__ import annotations

from sessiond.session.port import ConnectionPort
from sessiond.session.session import Session
from sessiond.session.state import ChunkJob, EngineOp, Op, SessionEnv

__all__ = ["ChunkJob", "ConnectionPort", "EngineOp", "Op", "Session", "SessionEnv"]
