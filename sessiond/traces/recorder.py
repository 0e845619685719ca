"""Recorded traces: the daemon's event log (or live events) -> trace lines, `source: "recorded"`.

Events are normalised into a valid v1 trace: times become seconds from the first recorded event,
session ids become trace-local keys (s1, s2, ... in order of appearance), only the fields of
docs/traces.md are kept (the replayer assigns `seq` and `id` itself), and events that a replay could
not reproduce are dropped and counted: those of sessions created before the recording began, the
first `attach` right after `create` (a replay's create connects by itself), repeated `attach` /
`detach`, anything after `close`, and events whose fields fail validation.

Co-play: the create keeps `players` (the seats), a co-player's action keeps `player` (its seat);
a co-player's actions do not depend on the owner's connection (the owner may be detached meanwhile).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from sessiond.traces._event_fields import check_event_fields
from sessiond.traces.errors import TraceError
from sessiond.traces.format import Trace, TraceEvent, TraceHeader

__all__ = ["KEPT_FIELDS", "LoggedEvent", "RecordStats", "TraceRecorder", "trace_from_event_stream",
           "trace_from_events"]

KEPT_FIELDS: dict[str, tuple[str, ...]] = {
    "create": ("mode", "prompt", "seed", "model", "transport", "players"),
    "action": ("keys", "mouse", "buttons", "axes", "player"),
    "direct": ("prompt", "seconds", "cut"),
}


class LoggedEvent(Protocol):
    """What the store's event log yields (sessiond.store.StoredEvent has this shape)."""

    @property
    def t(self) -> float: ...  # wall clock, seconds
    @property
    def session_id(self) -> str: ...
    @property
    def ev(self) -> str: ...
    @property
    def fields(self) -> dict[str, Any]: ...


@dataclass
class RecordStats:
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> count

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1


class TraceRecorder:
    """Accumulates events (from the log or live) and turns them into a recorded Trace."""

    def __init__(self) -> None:
        self.stats = RecordStats()
        self._keys: dict[str, str] = {}
        self._state: dict[str, str] = {}
        self._events: list[tuple[float, str, str, dict[str, Any]]] = []

    def add(self, t: float, session_id: str, ev: str, fields: dict[str, Any] | None = None) -> None:
        kept = {k: v for k, v in (fields or {}).items() if k in KEPT_FIELDS.get(ev, ())}
        reason = self._reject_reason(session_id, ev, kept)
        if reason is not None:
            self.stats.drop(reason)
            return
        if ev == "create":
            self._keys[session_id] = f"s{len(self._keys) + 1}"
        if not kept.get("player"):  # a co-player's action leaves the owner's connection state as it was
            self._state[session_id] = {"close": "closed", "detach": "detached"}.get(ev, "attached")
        self._events.append((t, self._keys[session_id], ev, kept))
        self.stats.kept += 1

    def add_logged(self, event: LoggedEvent) -> None:
        self.add(event.t, event.session_id, event.ev, event.fields)

    def to_trace(self, name: str, description: str | None = None) -> Trace:
        ordered = sorted(self._events, key=lambda e: e[0])
        start = ordered[0][0] if ordered else 0.0
        events = tuple(TraceEvent(round(t - start, 6), key, ev, f) for t, key, ev, f in ordered)
        recorded_at = datetime.fromtimestamp(start, tz=UTC).isoformat() if ordered else None
        summary = f"{len(self._keys)} sessions, {self.stats.kept} events kept"
        if self.stats.dropped:
            summary += ", dropped " + ", ".join(f"{n} {r}" for r, n in sorted(self.stats.dropped.items()))
        header = TraceHeader(name=name, source="recorded", recorded_at=recorded_at,
                             description=description or f"recorded by sessiond: {summary}",
                             extra={"recording": {"kept": self.stats.kept, "dropped": dict(self.stats.dropped)}})
        return Trace(header, events)

    def _reject_reason(self, session_id: str, ev: str, fields: dict[str, Any]) -> str | None:
        state = self._state.get(session_id)
        if ev == "create":
            if state is not None:
                return "duplicate_create"
        elif state is None:
            return "created_before_recording"
        elif state == "closed":
            return "after_close"
        elif fields.get("player"):
            pass  # a co-player's action: the owner's attach state does not matter
        elif ev == "attach" and state in ("attached", "created"):
            return "attach_while_attached"
        elif ev == "detach" and state == "detached":
            return "detach_while_detached"
        elif state == "detached" and ev not in ("attach", "close"):
            return "while_detached"
        try:
            check_event_fields(ev, fields, 0)
        except TraceError:
            return "invalid_fields"
        return None


def trace_from_events(events: Iterable[LoggedEvent], name: str, description: str | None = None) -> Trace:
    recorder = TraceRecorder()
    for event in events:
        recorder.add_logged(event)
    return recorder.to_trace(name, description)


async def trace_from_event_stream(events: AsyncIterable[LoggedEvent], name: str,
                                  description: str | None = None) -> Trace:
    """The same, from the store's async `iter_events()`."""
    recorder = TraceRecorder()
    async for event in events:
        recorder.add_logged(event)
    return recorder.to_trace(name, description)
