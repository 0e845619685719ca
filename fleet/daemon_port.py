"""What a fleet worker needs from its session daemon: the whole interface, declared here so the
fleet depends on no daemon internals. A daemon joins a fleet through a thin adapter that
implements `FleetDaemon`.

Failures are `protocols.errors.ProtocolError`s with their public codes; a refusal that the client
may retry (capacity, store briefly unavailable) also carries `retry_after_s` (seconds)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from protocols.http import CreateSessionRequest, CreateSessionResponse

__all__ = ["DaemonCapacity", "FleetDaemon"]


@dataclass(frozen=True)
class DaemonCapacity:
    """The daemon's capacity as its admission predicts it, published every second.

    headroom[mode]: share of the load budget still free for a session of `mode` (<= 0: full);
    cost[mode]: the share one more session of that mode would take (its duty prior x cost rate);
    kv_free_sessions: how many more sessions' KV fits in the pool; sessions: how many it holds."""

    headroom: dict[str, float]
    cost: dict[str, float]
    kv_free_sessions: int
    sessions: int
    draining: bool = False


class FleetDaemon(Protocol):
    async def create(self, request: CreateSessionRequest, base_url: str) -> CreateSessionResponse:
        """Admission decision + durable record + session, exactly as `POST /v1/sessions` does;
        media URLs are built on `base_url` (the worker's public address)."""
        ...

    async def resume(self, session_id: str, base_url: str) -> dict[str, Any]:
        """Take over a session another worker held: admit it, load its durable record and
        continuation snapshot from the shared store, rebuild its KV from the continuation latents.
        Returns the public session fields (`CreateSessionResponse` without the token)."""
        ...

    async def status(self, session_id: str, token: str | None) -> dict[str, Any]:
        """`GET /v1/sessions/{sid}`'s JSON body, token checked (any live token of the session): the
        `SessionStatus` fields and the worker's extension fields (`spectators`, `players`, ...),
        which the gateway's status passes on as they are."""
        ...

    async def close(self, session_id: str, token: str | None) -> None:
        """`DELETE /v1/sessions/{sid}`, token checked: the session and its durable record go."""
        ...

    async def release(self, session_id: str, moved_to: dict[str, Any] | None = None) -> None:
        """Stop serving a session here, keeping its durable record and snapshot (it moved away, or
        a duplicate resume lost the epoch race). A connected client is told where it went
        (`moved_to`: the new worker's public session fields, `ws_url` and `webrtc_url` among them)
        and its connection ends; without `moved_to` the connection just ends."""
        ...

    def capacity(self) -> DaemonCapacity:
        """The current capacity snapshot (cheap: called every second on the event loop)."""
        ...

    async def drain(self) -> list[str]:
        """Stop admitting, snapshot every session, and return the ids of the sessions to move."""
        ...
