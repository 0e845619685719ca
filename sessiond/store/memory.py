"""The in-memory store: the embedded default. Lives and dies with the daemon process."""

from __future__ import annotations

from collections.abc import AsyncIterator

from sessiond.store.base import SessionRecord, StoredEvent

__all__ = ["MemoryStore"]


class MemoryStore:
    kind = "memory"

    def __init__(self, max_events: int = 1_000_000) -> None:
        self._records: dict[str, dict[str, object]] = {}
        self._snapshots: dict[str, bytes] = {}
        self._positions: dict[str, int] = {}
        self._events: list[StoredEvent] = []
        self._max_events = max_events

    async def ping(self) -> bool:
        return True

    async def put_session(self, record: SessionRecord) -> None:
        self._records[record.session_id] = record.to_json()

    async def get_session(self, session_id: str) -> SessionRecord | None:
        data = self._records.get(session_id)
        return None if data is None else SessionRecord.from_json(dict(data))

    async def delete_session(self, session_id: str) -> None:
        self._records.pop(session_id, None)
        self._snapshots.pop(session_id, None)
        self._positions.pop(session_id, None)

    async def list_sessions(self) -> list[str]:
        return sorted(self._records)

    async def put_position(self, session_id: str, frames: int) -> None:
        if session_id in self._records:
            self._positions[session_id] = int(frames)

    async def get_position(self, session_id: str) -> int | None:
        return self._positions.get(session_id)

    async def put_snapshot(self, session_id: str, data: bytes) -> None:
        self._snapshots[session_id] = bytes(data)

    async def get_snapshot(self, session_id: str) -> bytes | None:
        return self._snapshots.get(session_id)

    async def append_events(self, events: list[StoredEvent]) -> None:
        self._events.extend(events)
        if len(self._events) > self._max_events:
            del self._events[: len(self._events) - self._max_events]

    async def iter_events(self, session_id: str | None = None) -> AsyncIterator[StoredEvent]:
        for event in list(self._events):
            if session_id is None or event.session_id == session_id:
                yield event

    async def close(self) -> None:
        return None
