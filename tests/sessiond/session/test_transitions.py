"""The Session's own transitions that others ask for: offload, restore failure, freeze (hand-off),
move away, snapshot, taking its queued engine ops, hanging up."""

from __future__ import annotations

import numpy as np

from engine.api import ChunkFrames
from protocols.errors import ErrorCode
from protocols.messages import Error, Moved
from sessiond.session import EngineOp, Op, connect
from sessiond.session.lifecycle import SessionState
from tests.sessiond._factory import make_session


def test_offload_moves_only_an_idle_session_without_a_chunk_in_the_engine() -> None:
    session = make_session()
    session.set_state(SessionState.IDLE)
    session.begin_job(0.0, 0.0)
    assert session.offload(reason="test") is False and session.state == SessionState.IDLE
    session.job = None
    assert session.offload(reason="test") is True
    assert (session.state, session.ops) == (SessionState.OFFLOADED, [EngineOp(Op.OFFLOAD)])
    assert session.offload() is False  # already offloaded: nothing queued twice
    assert session.ops == [EngineOp(Op.OFFLOAD)]


def test_a_failed_restore_leaves_the_session_offloaded_and_tells_the_viewer() -> None:
    session = make_session()
    port = connect(session, "raw")
    assert session.state == SessionState.ACTIVE
    session.restore_failed()
    assert session.state == SessionState.OFFLOADED
    error = session.out.take()
    assert isinstance(error, Error) and (error.code, error.fatal) == (ErrorCode.CAPACITY.value, False)
    assert port.current


def test_freeze_stops_everything_and_drops_the_unsent_frames() -> None:
    session = make_session()
    connect(session, "raw")
    job = session.begin_job(0.0, 0.0)
    session.on_frames(job, ChunkFrames(0, np.zeros((8, 4, 4, 3), np.uint8)))
    session.ops.append(EngineOp(Op.SNAPSHOT))
    generation = session.out.generation
    session.freeze()
    assert (session.job, session.segment, session.ops) == (None, None, [])
    assert session.out.generation == generation + 1 and session.out.media_frames == 0
    assert session.env.metrics.frames_dropped.labels(reason="moved")._value.get() == 8


def test_move_away_tells_the_viewer_where_to_and_ends_the_connection() -> None:
    session = make_session()
    port = connect(session, "raw")
    moved = Moved(ws_url="ws://b/v1/sessions/s_1/ws", webrtc_url="http://b/v1/sessions/s_1/webrtc")
    session.move_away(moved)
    assert session.out.take() == moved
    assert port.connection.ending and session.out.event.is_set()


def test_a_snapshot_is_queued_once_and_only_for_a_generating_session() -> None:
    idle = make_session()
    idle.set_state(SessionState.IDLE)
    assert idle.snapshot() is False and idle.ops == []
    playing = make_session()
    connect(playing, "raw")
    assert playing.snapshot() is True
    assert playing.snapshot() is False
    assert playing.take_ops() == [EngineOp(Op.SNAPSHOT)]
    assert playing.ops == []


def test_hang_up_closes_the_connection_and_keeps_the_session() -> None:
    session = make_session()
    port = connect(session, "raw")
    session.hang_up()
    assert port.connection.closed and session.state == SessionState.ACTIVE
