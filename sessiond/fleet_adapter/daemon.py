"""The daemon as a fleet worker: `DaemonAdapter` implements the fleet's `FleetDaemon` interface over
a running `Daemon` (create and resume through the daemon's own directory and admission, durable
records in the shared store, drain and release through `sessiond.runtime.handoff`), and `capacity_of`
turns the admission policy's snapshot into the capacity a worker publishes.

Imports nothing of the `fleet` package at runtime: the interface is structural (a Protocol)."""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any

from engine.api import KVStats
from protocols.errors import ErrorCode, ProtocolError, Refused
from protocols.http import CreateSessionRequest, CreateSessionResponse
from protocols.messages import Moved
from sessiond.errors import StoreUnavailable
from sessiond.runtime.daemon import Daemon
from sessiond.runtime.directory import (
    create_session,
    delete_session,
    find_with_access,
    resume_session,
    status_body,
)
from sessiond.runtime.handoff import drop_duplicate, hand_off, let_go

if TYPE_CHECKING:
    from fleet.daemon_port import DaemonCapacity

__all__ = ["MODES", "DaemonAdapter", "capacity_of"]

logger = logging.getLogger(__name__)

MODES = ("world", "director")


def _kv_free_sessions(kv: KVStats | None, kv_bytes_per_session: int) -> int | None:
    if kv is None:
        return None
    per = max(1, math.ceil(kv_bytes_per_session / max(1, kv.slab_bytes)))
    return kv.slabs_free // per


def capacity_of(snapshot: dict[str, Any], *, sessions: int, kv: KVStats | None, kv_bytes_per_session: int,
                draining: bool) -> DaemonCapacity:
    """The capacity of a daemon whose admission policy reports `snapshot` (its `/v1/capacity`
    `admission` object). Cost-model policies (duty, fifo, one-per-gpu): headroom = load budget -
    predicted load, cost = the mode's duty prior (a director's as measured, `director_prior`) x the
    cost rate at the expected batch; one-per-gpu also counts its GPU slots. The KV policy: headroom = share of `max_sessions` still free.
    KV headroom: sessions that still fit the KV budget (the policy's, else the engine's free slabs)."""
    from fleet.daemon_port import DaemonCapacity

    kv_free = _kv_free_sessions(kv, kv_bytes_per_session)
    if "load_budget" in snapshot:
        free = float(snapshot["load_budget"]) - float(snapshot.get("predicted_load") or 0.0)
        rates = (snapshot.get("cost_model") or {}).get("cost_rate") or {}
        batch = str(max(1, int(snapshot.get("expected_batch") or 1)))
        rate = float(rates.get(batch, rates.get("1", 1.0))) if rates else 1.0
        priors = snapshot.get("priors") or {}
        # a director counts at the prior the daemon has measured where it publishes one
        director = (snapshot.get("director_prior") or {}).get("value", priors.get("director", 1.0))
        cost = {"world": float(priors.get("world_playing", 1.0)) * rate, "director": float(director) * rate}
        headroom = dict.fromkeys(MODES, free)
        if "gpus" in snapshot:
            gpus = max(1, int(snapshot["gpus"]))
            slots = (gpus - int(snapshot.get("sessions") or 0)) / gpus
            headroom = dict.fromkeys(MODES, min(free, slots))
            cost = dict.fromkeys(MODES, 1.0 / gpus)
        budget = snapshot.get("kv")
        if isinstance(budget, dict) and "max_total" in budget:
            in_budget = int(budget["max_total"]) - int(snapshot.get("sessions") or 0)
            kv_free = in_budget if kv_free is None else min(kv_free, in_budget)
        if snapshot.get("max_sessions") is not None:  # --max-sessions caps every policy
            open_slots = int(snapshot["max_sessions"]) - int(snapshot.get("sessions") or 0)
            kv_free = open_slots if kv_free is None else min(kv_free, open_slots)
    else:
        most = max(1, int(snapshot.get("max_sessions") or 1))
        admitted = int(snapshot.get("sessions") or 0)
        headroom = dict.fromkeys(MODES, (most - admitted) / most)
        cost = dict.fromkeys(MODES, 1.0 / most)
        slabs, per = snapshot.get("kv_slabs_free"), snapshot.get("kv_slabs_per_session")
        if isinstance(slabs, int) and isinstance(per, int) and per > 0:
            kv_free = slabs // per if kv_free is None else min(kv_free, slabs // per)
    if kv_free is None:
        kv_free = 0
    if kv_free <= 0:
        headroom = dict.fromkeys(MODES, min(0.0, *headroom.values()))
    return DaemonCapacity(headroom=headroom, cost=cost, kv_free_sessions=max(0, kv_free), sessions=sessions,
                          draining=draining)


def _store_refusal(exc: StoreUnavailable) -> Refused:
    return Refused(ErrorCode.STORE_UNAVAILABLE, f"the session store is unavailable ({exc}); retry shortly", 2.0)


class DaemonAdapter:
    """`fleet.daemon_port.FleetDaemon` over a running daemon."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    async def create(self, request: CreateSessionRequest, base_url: str) -> CreateSessionResponse:
        return await create_session(self.daemon, request, base_url)

    async def resume(self, session_id: str, base_url: str) -> dict[str, Any]:
        live = self.daemon.sessions.get(session_id)
        if live is not None:
            return dict(live.public)
        try:
            record = await self.daemon.store.get_session(session_id)
        except StoreUnavailable as exc:
            raise _store_refusal(exc) from exc
        if record is None:
            raise ProtocolError(ErrorCode.NOT_FOUND, f"no session {session_id} in the shared store")
        session = await resume_session(self.daemon, record, base_url)
        return dict(session.public)

    async def status(self, session_id: str, token: str | None) -> dict[str, Any]:
        """Any live token of the session may read its status, as on the daemon's own route (a share
        link's page asks the gateway where the session is before it connects); the same body as
        that route, `spectators` and `players` included."""
        found, _ = await find_with_access(self.daemon, session_id, token)
        return status_body(self.daemon, found)

    async def close(self, session_id: str, token: str | None) -> None:
        await delete_session(self.daemon, session_id, token)

    async def release(self, session_id: str, moved_to: dict[str, Any] | None = None) -> None:
        moved = None
        if moved_to is not None:
            moved = Moved(ws_url=str(moved_to.get("ws_url", "")), webrtc_url=str(moved_to.get("webrtc_url", "")))
        if not let_go(self.daemon, session_id, moved):
            await drop_duplicate(self.daemon, session_id)

    def capacity(self) -> DaemonCapacity:
        d = self.daemon
        sessions = len(d.sessions)
        if d.admission is None or not d.host.loaded or not d.ready:
            from fleet.daemon_port import DaemonCapacity

            return DaemonCapacity(headroom=dict.fromkeys(MODES, 0.0), cost=dict.fromkeys(MODES, 1.0),
                                  kv_free_sessions=0, sessions=sessions, draining=d.draining)
        kv = d.scheduler.kv if d.scheduler is not None else None
        return capacity_of(d.admission.policy.snapshot(time.monotonic()), sessions=sessions, kv=kv,
                           kv_bytes_per_session=d.host.info.kv_bytes_per_session, draining=d.draining)

    async def drain(self) -> list[str]:
        d = self.daemon
        d.draining = True
        try:
            await hand_off(d, list(d.sessions))
        except StoreUnavailable as exc:  # the frozen sessions resume from their last stored records
            logger.error("drain: the store refused the final records: %s", exc)
        return sorted(d.handed_off)
