"""The fleet's coded failures."""

from __future__ import annotations

__all__ = ["DirectoryUnavailable", "FencedOut", "FleetError", "NoWorkerAdmits", "WorkerUnreachable"]


class FleetError(Exception):
    code = "fleet_error"


class DirectoryUnavailable(FleetError):
    """The session directory (Redis) did not answer."""

    code = "directory_unavailable"


class FencedOut(FleetError):
    """A write for a session by a worker that no longer owns it: its epoch is older than the binding's."""

    code = "fenced_out"

    def __init__(self, session_id: str, worker: str, epoch: int, current: tuple[str, int] | None) -> None:
        held = f"bound to {current[0]} at epoch {current[1]}" if current else "not bound"
        super().__init__(f"session {session_id}: {worker} at epoch {epoch} is fenced out (the session is {held})")
        self.session_id = session_id
        self.current = current


class NoWorkerAdmits(FleetError):
    """Every worker refused a new session; retry after the smallest of their retry-afters."""

    code = "capacity"

    def __init__(self, retry_after_s: float, reasons: list[str], reason: str | None = None) -> None:
        detail = "; ".join(reasons) if reasons else "no live worker"
        super().__init__(f"no worker admits the session ({detail}); retry in {retry_after_s:.1f} s")
        self.retry_after_s = retry_after_s
        self.reasons = reasons
        self.reason = reason  # the one error-body `reason` every worker gave, else None


class WorkerUnreachable(FleetError):
    """A control call to a worker failed or timed out."""

    code = "worker_unreachable"
