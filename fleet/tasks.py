"""Background tasks that stop when told. A Redis client may swallow the cancellation of the call it
is in (it surfaces as a connection error, or not at all); a loop that catches those errors and goes
on would then never end, and neither would the process waiting for it. `cancel_requested` lets
such a loop see that it was cancelled anyway; `stop` cancels a task and waits a bounded time."""

from __future__ import annotations

import asyncio
import logging

__all__ = ["STOP_WITHIN_S", "cancel_requested", "raise_if_cancelled", "stop"]

logger = logging.getLogger(__name__)

STOP_WITHIN_S = 2.0  # how long a stopping process waits for one of its background tasks


def cancel_requested() -> bool:
    """Whether the current task has been cancelled (whatever a call inside it did with that)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def raise_if_cancelled() -> None:
    """Re-raise a cancellation that a call inside the current task swallowed."""
    if cancel_requested():
        raise asyncio.CancelledError


async def stop(task: asyncio.Task[None], within_s: float = STOP_WITHIN_S) -> bool:
    """Cancel `task` and wait for it at most `within_s`; False (logged) when it did not end."""
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=within_s)
    if not done:
        logger.warning("task %s did not stop within %.1f s of its cancellation; leaving it", task.get_name(),
                       within_s)
        return False
    if not task.cancelled() and task.exception() is not None:
        logger.warning("task %s ended with %r", task.get_name(), task.exception())
    return True
