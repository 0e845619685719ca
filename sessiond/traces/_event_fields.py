"""Per-`ev` field checks of docs/traces.md v1 (private to the trace format), the co-play
extension's included: `players` on a world `create`, `player` on the events a co-player makes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sessiond.traces.errors import TraceError

__all__ = ["EVENT_CHECKS", "MAX_PLAYERS", "MODES", "PLAYER_EVENTS", "TRANSPORTS", "check_event_fields", "player_of"]

MODES = ("world", "director")
TRANSPORTS = ("ws-raw", "ws-fmp4", "webrtc")
MAX_PLAYERS = 8  # seats of a co-play session, the owner included (docs/protocol.md, Co-play)
PLAYER_EVENTS = ("action", "detach", "attach")  # what a co-player's connection does: the rest is the owner's


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bad(line: int, ev: str, name: str, expected: str, value: Any) -> TraceError:
    return TraceError("invalid_field", f"`{ev}` field `{name}` must be {expected}, got {value!r}", line)


def _optional(fields: dict[str, Any], name: str, ok: Callable[[Any], bool], expected: str, ev: str,
              line: int) -> None:
    if name in fields and not ok(fields[name]):
        raise _bad(line, ev, name, expected, fields[name])


def _check_create(fields: dict[str, Any], line: int) -> None:
    if fields.get("mode") not in MODES:
        raise _bad(line, "create", "mode", f"one of {list(MODES)}", fields.get("mode"))
    _optional(fields, "prompt", lambda v: isinstance(v, str), "a string", "create", line)
    _optional(fields, "seed", _is_int, "an integer", "create", line)
    _optional(fields, "model", lambda v: isinstance(v, str) and v != "", "a non-empty string", "create", line)
    _optional(fields, "transport", lambda v: v in TRANSPORTS, f"one of {list(TRANSPORTS)}", "create", line)
    _optional(fields, "players", lambda v: _is_int(v) and 1 <= v <= MAX_PLAYERS, f"an integer in [1, {MAX_PLAYERS}]",
              "create", line)
    if fields.get("players", 1) > 1 and fields["mode"] != "world":
        raise _bad(line, "create", "players", "1 for a director session (co-play is a world's)", fields["players"])


def _check_action(fields: dict[str, Any], line: int) -> None:
    keys = fields.get("keys")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise _bad(line, "action", "keys", "a list of strings", keys)
    _optional(fields, "mouse", lambda v: isinstance(v, list) and len(v) == 2 and all(map(_is_number, v)),
              "[dx, dy] numbers", "action", line)
    _optional(fields, "buttons", lambda v: _is_int(v) and v >= 0, "a non-negative integer", "action", line)
    _optional(fields, "axes", lambda v: isinstance(v, list) and all(map(_is_number, v)),
              "a list of numbers", "action", line)


def _check_direct(fields: dict[str, Any], line: int) -> None:
    if not isinstance(fields.get("prompt"), str):
        raise _bad(line, "direct", "prompt", "a string", fields.get("prompt"))
    _optional(fields, "seconds", lambda v: _is_number(v) and v > 0, "a positive number", "direct", line)
    _optional(fields, "cut", lambda v: isinstance(v, bool), "a boolean", "direct", line)


def _no_fields(fields: dict[str, Any], line: int) -> None:
    return None


EVENT_CHECKS: dict[str, Callable[[dict[str, Any], int], None]] = {
    "create": _check_create,
    "action": _check_action,
    "direct": _check_direct,
    "interrupt": _no_fields,
    "flush": _no_fields,
    "pause": _no_fields,
    "resume": _no_fields,
    "detach": _no_fields,
    "attach": _no_fields,
    "close": _no_fields,
}


def player_of(fields: dict[str, Any]) -> int:
    """The seat an event is from: its `player`, absent = the owner (0)."""
    player = fields.get("player", 0)
    return int(player)


def check_event_fields(ev: str, fields: dict[str, Any], line: int) -> None:
    check = EVENT_CHECKS.get(ev)
    if check is None:
        raise TraceError("unknown_event", f"unknown `ev` {ev!r}; expected one of {sorted(EVENT_CHECKS)}", line)
    if "player" in fields:
        _optional(fields, "player", lambda v: _is_int(v) and 0 <= v < MAX_PLAYERS,
                  f"an integer in [0, {MAX_PLAYERS - 1}]", ev, line)
        if fields["player"] != 0 and ev not in PLAYER_EVENTS:
            raise _bad(line, ev, "player", f"absent or 0: only {', '.join(PLAYER_EVENTS)} may come from a co-player",
                       fields["player"])
    check(fields, line)
