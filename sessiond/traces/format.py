"""Trace format v1 (docs/traces.md): parse, validate and write JSON Lines traces.

Line 1 is the header; every later line is one event ``{"t", "s", "ev", ...}`` sorted by ``t``.
Every defect is a :class:`TraceError` naming its 1-based line. Co-play (an optional extension): a
world `create` may carry `players` (seats, the owner included) and an `action`, `detach` or
`attach` may carry `player` (its seat, 1..players-1; absent: the owner), each seat with a
connection state of its own; a trace without them reads exactly as before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sessiond.traces._event_fields import check_event_fields, player_of
from sessiond.traces.errors import TraceError

__all__ = ["FORMAT", "SOURCES", "VERSION", "Trace", "TraceEvent", "TraceHeader", "dump_trace",
           "load_trace", "parse_trace", "write_trace"]

FORMAT = "sessiond-trace"
VERSION = 1
SOURCES = ("recorded", "synthesized")
_HEADER_KEYS = ("format", "version", "name", "source", "recorded_at", "description", "generator")
_EVENT_KEYS = ("t", "s", "ev")


@dataclass(frozen=True)
class TraceHeader:
    name: str
    source: str  # "recorded" | "synthesized"
    recorded_at: str | None = None
    description: str | None = None
    generator: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # optional fields we do not interpret

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": FORMAT, "version": VERSION, "name": self.name, "source": self.source}
        for key in ("recorded_at", "description", "generator"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class TraceEvent:
    t: float  # seconds from the trace start
    s: str  # trace-local session key
    ev: str
    fields: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"t": round(self.t, 6), "s": self.s, "ev": self.ev, **self.fields}


@dataclass(frozen=True)
class Trace:
    header: TraceHeader
    events: tuple[TraceEvent, ...]

    @property
    def duration_s(self) -> float:
        return self.events[-1].t if self.events else 0.0

    def sessions(self) -> list[str]:
        """Session keys in order of first appearance."""
        return list(dict.fromkeys(e.s for e in self.events))

    def events_of(self, session: str) -> list[TraceEvent]:
        return [e for e in self.events if e.s == session]

    def players_of(self, session: str) -> int:
        """Seats of a session, the owner included (its create's `players`; 1 without co-play)."""
        return next((int(e.fields.get("players", 1)) for e in self.events if e.s == session and e.ev == "create"), 1)


def _parse_header(obj: dict[str, Any]) -> TraceHeader:
    if obj.get("format") != FORMAT:
        raise TraceError("bad_header", f"header `format` must be {FORMAT!r}, got {obj.get('format')!r}", 1)
    version = obj.get("version")
    if version != VERSION or isinstance(version, bool):
        raise TraceError("bad_header", f"header `version` must be {VERSION}, got {version!r}", 1)
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise TraceError("bad_header", f"header `name` must be a non-empty string, got {name!r}", 1)
    source = obj.get("source")
    if source not in SOURCES:
        raise TraceError("bad_header", f"header `source` must be one of {list(SOURCES)}, got {source!r}", 1)
    recorded_at = obj.get("recorded_at")
    if recorded_at is not None:
        try:
            datetime.fromisoformat(str(recorded_at))
        except ValueError:
            raise TraceError("bad_header", f"header `recorded_at` must be ISO-8601, got {recorded_at!r}", 1) from None
    description = obj.get("description")
    if description is not None and not isinstance(description, str):
        raise TraceError("bad_header", "header `description` must be a string", 1)
    generator = obj.get("generator")
    if generator is not None and not isinstance(generator, dict):
        raise TraceError("bad_header", "header `generator` must be an object of parameters", 1)
    extra = {k: v for k, v in obj.items() if k not in _HEADER_KEYS}
    return TraceHeader(name, source, recorded_at, description, generator, extra)


def _parse_event(obj: dict[str, Any], line: int, last_t: float) -> TraceEvent:
    t = obj.get("t")
    if not isinstance(t, int | float) or isinstance(t, bool) or not math.isfinite(t) or t < 0:
        raise TraceError("invalid_field", f"`t` must be a finite number >= 0, got {t!r}", line)
    if t < last_t:
        raise TraceError("unsorted", f"events must be sorted by `t`: {t} comes after {last_t}", line)
    s = obj.get("s")
    if not isinstance(s, str) or not s:
        raise TraceError("invalid_field", f"`s` must be a non-empty string, got {s!r}", line)
    ev = obj.get("ev")
    if not isinstance(ev, str):
        raise TraceError("invalid_field", f"`ev` must be a string, got {ev!r}", line)
    fields = {k: v for k, v in obj.items() if k not in _EVENT_KEYS}
    check_event_fields(ev, fields, line)
    return TraceEvent(float(t), s, ev, fields)


def _check_sequence(event: TraceEvent, line: int, state: dict[str, str], seats: dict[str, int]) -> None:
    """Per session: `create` first, nothing after `close`, only `attach`/`close` while detached.
    A co-player's events (`player` k >= 1) need a seat the create asked for (`players`) and follow
    the same attach rules on that seat's own state (each seat starts attached at the create)."""
    current = state.get(event.s)
    if current is None and event.ev != "create":
        raise TraceError("bad_sequence", f"session {event.s!r} must begin with `create`, got `{event.ev}`", line)
    if current is not None and event.ev == "create":
        raise TraceError("bad_sequence", f"session {event.s!r} is created twice", line)
    if current == "closed":
        raise TraceError("bad_sequence", f"session {event.s!r} has `{event.ev}` after `close`", line)
    if event.ev == "create":
        seats[event.s] = int(event.fields.get("players", 1))
    player = player_of(event.fields)
    if player:
        if player >= seats[event.s]:
            raise TraceError("bad_sequence", f"session {event.s!r} has {seats[event.s]} seat(s) (`players` at its "
                             f"create), so no player {player}", line)
        key = f"{event.s}\x00{player}"
        seat = state.get(key, "attached")
        if seat == "detached" and event.ev != "attach":
            raise TraceError("bad_sequence", f"player {player} of session {event.s!r} is detached; `{event.ev}` "
                             "needs `attach` first", line)
        if seat == "attached" and event.ev == "attach":
            raise TraceError("bad_sequence", f"player {player} of session {event.s!r} is already attached", line)
        state[key] = "detached" if event.ev == "detach" else "attached"
        return
    if current == "detached" and event.ev not in ("attach", "close"):
        raise TraceError("bad_sequence", f"session {event.s!r} is detached; `{event.ev}` needs `attach` first",
                         line)
    if current == "attached" and event.ev == "attach":
        raise TraceError("bad_sequence", f"session {event.s!r} is already attached", line)
    state[event.s] = {"close": "closed", "detach": "detached"}.get(event.ev, "attached")


def parse_trace(lines: Iterable[str]) -> Trace:
    """Parse and validate a trace; blank lines are ignored, everything else must be an object."""
    header: TraceHeader | None = None
    events: list[TraceEvent] = []
    state: dict[str, str] = {}
    seats: dict[str, int] = {}
    last_t = 0.0
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise TraceError("malformed_line", f"not valid JSON ({exc.msg} at column {exc.colno})", number) from None
        if not isinstance(obj, dict):
            raise TraceError("malformed_line", f"each line must be a JSON object, got {type(obj).__name__}", number)
        if header is None:
            if number != 1:
                raise TraceError("bad_header", "the header must be line 1", number)
            header = _parse_header(obj)
            continue
        event = _parse_event(obj, number, last_t)
        _check_sequence(event, number, state, seats)
        events.append(event)
        last_t = event.t
    if header is None:
        raise TraceError("bad_header", "the trace is empty: line 1 must be the header", 1)
    return Trace(header, tuple(events))


def load_trace(path: str | Path) -> Trace:
    with open(path, encoding="utf-8") as handle:
        return parse_trace(handle)


def dump_trace(trace: Trace) -> str:
    """The JSON Lines text of a trace; events are written in `t` order."""
    out = [json.dumps(trace.header.to_json(), separators=(",", ":"))]
    ordered = sorted(trace.events, key=lambda e: e.t)
    out.extend(json.dumps(e.to_json(), separators=(",", ":")) for e in ordered)
    return "\n".join(out) + "\n"


def write_trace(trace: Trace, path: str | Path) -> None:
    Path(path).write_text(dump_trace(trace), encoding="utf-8")
