"""The store interface: session directory + durable records, continuation snapshots and the
event log of every inbound control event. Implemented in memory and on Redis."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from sessiond.grants import Grant

__all__ = ["EVENT_KINDS", "SessionRecord", "Store", "StoredEvent"]

# the `ev` names of docs/traces.md: the event log is the raw material of recorded traces
EVENT_KINDS = ("create", "action", "direct", "interrupt", "flush", "pause", "resume", "attach", "detach",
               "close")


@dataclass
class SessionRecord:
    """What survives a daemon restart. Never holds a token, only its hash."""

    session_id: str
    mode: str
    model: str
    seed: int
    prompt: str
    width: int
    height: int
    fps: int
    token_hash: str
    created_at: float
    last_active_at: float
    state: str = "created"
    frames_sent: int = 0  # the PTS position: the next frame sent gets pts_for(frames_sent)
    segment: int = 0
    action_space: dict[str, Any] = field(default_factory=dict)
    api_key: str | None = None  # the name of the API key that created it (`--api-keys`), never the key
    grants: list[Grant] = field(default_factory=list)  # share links and invites (sessiond.grants)
    players: int = 1  # co-play seats of a world session, the owner included (1: played alone)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        fields_ = {k: v for k, v in data.items() if k in names}
        fields_["grants"] = [Grant.from_json(g) for g in data.get("grants") or ()]
        return cls(**fields_)


@dataclass(frozen=True)
class StoredEvent:
    """One inbound control event: wall time (unix s), session, docs/traces.md `ev` and its fields."""

    t: float
    session_id: str
    ev: str
    fields: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"t": self.t, "s": self.session_id, "ev": self.ev, **self.fields}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredEvent:
        rest = {k: v for k, v in data.items() if k not in ("t", "s", "ev")}
        return cls(t=float(data["t"]), session_id=str(data["s"]), ev=str(data["ev"]), fields=rest)


class Store(Protocol):
    """Every method may raise sessiond.errors.StoreUnavailable."""

    kind: str  # "memory" | "redis"

    async def ping(self) -> bool:
        """True when the store answers (never raises)."""
        ...

    async def put_session(self, record: SessionRecord) -> None: ...

    async def get_session(self, session_id: str) -> SessionRecord | None: ...

    async def delete_session(self, session_id: str) -> None:
        """Removes the record and its snapshot; the event log keeps its history."""
        ...

    async def list_sessions(self) -> list[str]: ...

    async def put_position(self, session_id: str, frames: int) -> None:
        """The session's timeline position: every frame with idx < `frames` may have left the
        daemon. Written before a chunk is handed to its transport (one write per chunk), so a
        daemon restarted after a crash resumes at or after it, never before. Written only while the
        session's record exists: a write that lands after `delete_session` (a client timed out on
        it, the server ran it later) writes nothing."""
        ...

    async def get_position(self, session_id: str) -> int | None: ...

    async def put_snapshot(self, session_id: str, data: bytes) -> None: ...

    async def get_snapshot(self, session_id: str) -> bytes | None: ...

    async def append_events(self, events: list[StoredEvent]) -> None: ...

    def iter_events(self, session_id: str | None = None) -> AsyncIterator[StoredEvent]:
        """Every logged event in order, of one session or of all."""
        ...

    async def close(self) -> None: ...
