"""The engine's own thread: calls run in order off the event loop; a stopped one refuses calls."""

from __future__ import annotations

import asyncio
import threading

import pytest

from sessiond.runtime.engine_worker import EngineWorker, WorkerStopped


async def test_the_engine_thread_runs_calls_in_order_off_the_loop() -> None:
    seen: list[tuple[int, str]] = []
    worker = EngineWorker(max_queue=2)
    worker.start()
    loop_thread = threading.current_thread().name
    results = await asyncio.gather(*(worker.call(lambda i=i: seen.append((i, threading.current_thread().name))
                                                 or i) for i in range(5)))
    assert results == [0, 1, 2, 3, 4]
    assert all(name != loop_thread for _, name in seen)
    with pytest.raises(ZeroDivisionError):
        await worker.call(lambda: 1 / 0)
    await worker.stop()
    with pytest.raises(WorkerStopped):
        await worker.call(lambda: 1)
    assert [i for i, _ in seen] == [0, 1, 2, 3, 4]
