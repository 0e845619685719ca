"""Sessions: the `Session` and the parts it composes (lifecycle, action timeline, output stream,
playback clock, segments, stats, connection), its inbound message dispatch and its port."""

from __future__ import annotations

from sessiond.session.env import SessionEnv
from sessiond.session.jobs import ChunkJob, EngineOp, Op
from sessiond.session.port import ConnectionPort, connect
from sessiond.session.session import Session

__all__ = ["ChunkJob", "ConnectionPort", "EngineOp", "Op", "Session", "SessionEnv", "connect"]
