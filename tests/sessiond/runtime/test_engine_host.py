"""The engine host: what runs on the engine thread (one step of a batch, a session's queued ops)
isolates faults per session; the typed calls run on the engine's own thread."""

from __future__ import annotations

import threading

import pytest

from engine.api import FrameAction, Phase
from sessiond.runtime.engine_host import EngineHost, Entry, run_ops, run_step
from sessiond.session import EngineOp, Op
from tests.sessiond._fake_engine import FakeEngine


def test_an_exception_in_one_sessions_begin_fails_only_that_session() -> None:
    engine = FakeEngine(fail_begin=("s_bad",))
    out = run_step(engine, (Entry("s_ok", FrameAction()), Entry("s_bad", FrameAction())))
    assert out.failed == {"s_bad": "RuntimeError: boom"}
    assert [(r.session_id, r.error, r.phase) for r in out.chunks()] == [("s_ok", None, Phase.DENOISE)]


def test_a_batch_that_raises_is_retried_item_by_item_to_find_the_culprit() -> None:
    engine = FakeEngine(fail_step=("s_bad",))
    out = run_step(engine, (Entry("s_ok", FrameAction()), Entry("s_bad", FrameAction())))
    assert out.failed == {"s_bad": "RuntimeError: batch boom"}
    assert [(r.session_id, r.error) for r in out.chunks()] == [("s_ok", None)]
    assert engine.plans == [(("s_ok", Phase.DENOISE),)]


def test_ops_run_in_order_and_a_failed_restore_is_reported() -> None:
    engine = FakeEngine()
    out = run_ops(engine, {"s_a": [EngineOp(Op.MARK_DELIVERED, chunk_index=3), EngineOp(Op.ROLLBACK)],
                           "s_full": [EngineOp(Op.RESTORE), EngineOp(Op.ROLLBACK)]})
    assert engine.calls == [("delivered:3", "s_a"), ("rollback", "s_a"), ("restore", "s_full")]
    assert out.restore_failed == ("s_full",) and out.errors == {}


class _SnapshottingEngine(FakeEngine):
    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()
        self.closed: list[str] = []

    def snapshot(self, sid: str) -> bytes:
        self.threads.add(threading.current_thread().name)
        if sid == "s_broken":
            raise RuntimeError("no snapshot")
        return sid.encode()

    def close_session(self, sid: str) -> None:
        self.closed.append(sid)


async def test_at_shutdown_every_session_is_closed_and_a_failed_snapshot_left_out() -> None:
    engine = _SnapshottingEngine()
    host = EngineHost(engine)
    host.start()
    try:
        snapshots = await host.snapshot_and_close(["s_a", "s_broken", "s_b"])
    finally:
        await host.stop()
    assert snapshots == {"s_a": b"s_a", "s_b": b"s_b"}
    assert engine.closed == ["s_a", "s_broken", "s_b"]
    assert engine.threads == {"sessiond-engine"}  # never the event loop's thread


def test_a_host_without_an_engine_says_to_load_it() -> None:
    with pytest.raises(RuntimeError, match=r"await EngineHost.load\(\) first"):
        EngineHost().info  # noqa: B018
    assert EngineHost().loaded is False
