"""Admission's answer to sessions over their prior, applied by the sessions themselves:
`degrade_lead` keeps a world session at one chunk of lead until admission no longer names it;
`offload_idle` moves an idle session's KV to host memory now, where an offload is cheap
(`sessiond.runtime.idle_offload`: a dear one would take engine time from the sessions it relieves)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sessiond.admission.decision import OverrunAction
from sessiond.session.session import Session

__all__ = ["apply_overruns"]


def apply_overruns(sessions: Mapping[str, Session], actions: Iterable[OverrunAction], *,
                   offload: bool = True) -> None:
    actions = list(actions)
    degraded = {a.session_id for a in actions if a.action == "degrade_lead"}
    for sid, live in sessions.items():
        if sid not in degraded:
            live.restore_lead()
    for action in actions:
        session = sessions.get(action.session_id)
        if session is None or session.state.terminal:
            continue
        if action.action == "degrade_lead":
            session.degrade_lead(action.duty, action.prior)
        elif action.action == "offload_idle" and offload:
            session.offload(reason="overrun")
