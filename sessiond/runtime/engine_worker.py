"""The engine's own thread. The event loop hands it callables through a bounded queue and
awaits futures that the thread resolves with loop.call_soon_threadsafe. Every engine call of
the daemon goes through here, so the engine is only ever touched by one thread."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["EngineWorker", "WorkerStopped"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
_STOP = object()


class WorkerStopped(RuntimeError):
    """The engine thread has stopped; no more engine calls are possible."""


class EngineWorker:
    def __init__(self, max_queue: int = 64, name: str = "sessiond-engine") -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queue)
        self._slots: asyncio.Semaphore | None = None
        self._max_queue = max_queue
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._stopped = threading.Event()
        self._started = False

    def start(self) -> None:
        self._slots = asyncio.Semaphore(self._max_queue)
        self._started = True
        self._thread.start()

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run fn(*args, **kwargs) on the engine thread; its exception is raised here."""
        if not self._started or self._stopped.is_set() or self._slots is None:
            raise WorkerStopped("the engine thread is not running")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        async with self._slots:  # bounded: never blocks the loop on queue.put
            self._queue.put_nowait((fn, args, kwargs, future, loop))
            return await future

    def _run(self) -> None:
        try:
            while True:
                item = self._queue.get()
                if item is _STOP:
                    return
                fn, args, kwargs, future, loop = item
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # delivered to the awaiting coroutine, never lost
                    loop.call_soon_threadsafe(_set_exception, future, exc)
                else:
                    loop.call_soon_threadsafe(_set_result, future, result)
        finally:
            self._stopped.set()
            logger.info("engine thread exited")

    async def stop(self, timeout_s: float = 30.0) -> None:
        """Ask the thread to finish what is queued and exit; waits without blocking the loop."""
        if not self._started or self._stopped.is_set():
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._queue.put, _STOP)
        await loop.run_in_executor(None, self._stopped.wait, timeout_s)


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
