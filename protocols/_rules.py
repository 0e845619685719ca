"""Semantic checks applied after a message's fields have their types (private to the codec)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._fields import SPECS, Kind, invalid
from .messages import (
    MAX_PLAYERS,
    SEGMENT_STATUSES,
    Action,
    Direct,
    Error,
    Frame,
    Hello,
    Init,
    Limits,
    Presence,
    SegmentEnd,
)

__all__ = ["MAX_AXES", "MAX_FRAME_SIDE", "MAX_INT", "MAX_KEYS", "MAX_KEY_CHARS", "MAX_LABEL_CHARS", "MAX_NAME_CHARS",
           "check"]

MAX_INT = 2**53 - 1  # the largest integer every client (JavaScript included) holds exactly
MAX_KEYS = 64  # held keys in one action
MAX_KEY_CHARS = 32  # one key name ("arrowup", "shiftleft", ...)
MAX_AXES = 16
MAX_NAME_CHARS = 256  # short identifying strings: hello.client, init.codec, error.code
MAX_FRAME_SIDE = 16384

# inclusive ranges by field name; every other integer field is a count or id in [0, MAX_INT]
_INT_RANGES: dict[str, tuple[int, int]] = {
    "action_seq": (-1, MAX_INT),
    "w": (1, MAX_FRAME_SIDE),
    "h": (1, MAX_FRAME_SIDE),
    "n": (1, MAX_INT),
    "dur": (1, MAX_INT),
}
_NON_NEGATIVE_FLOATS = ("fps", "gen_ms", "rtf")


def _check_ranges(msg: Any, prefix: str = "") -> None:
    for spec in SPECS[type(msg)]:
        value = getattr(msg, spec.name)
        name = prefix + spec.name
        if value is None:
            continue
        if spec.kind is Kind.INT:
            low, high = _INT_RANGES.get(spec.name, (0, MAX_INT))
            if not low <= value <= high:
                raise invalid(name, f"`{name}` must be in [{low}, {high}], got {value}")
        elif spec.kind is Kind.FLOAT and spec.name in _NON_NEGATIVE_FLOATS and value < 0:
            raise invalid(name, f"`{name}` must be >= 0, got {value}")
        elif spec.kind is Kind.LIMITS:
            _check_limits(value, f"{name}.")
        elif spec.kind is Kind.INT_LIST and spec.name == "players":
            _check_player_seqs(value, name)


def _check_player_seqs(seqs: tuple[int, ...], name: str) -> None:
    """co-play's per-player `action_seq`s: one per seat, each an action_seq."""
    if not 1 <= len(seqs) <= MAX_PLAYERS:
        raise invalid(name, f"`{name}` must hold 1..{MAX_PLAYERS} values, got {len(seqs)}")
    for i, seq in enumerate(seqs):
        if not -1 <= seq <= MAX_INT:
            raise invalid(f"{name}[{i}]", f"`{name}[{i}]` must be in [-1, {MAX_INT}], got {seq}")


def _check_limits(limits: Limits, prefix: str) -> None:
    _check_ranges(limits, prefix)
    for spec in SPECS[Limits]:
        if getattr(limits, spec.name) < 1:
            raise invalid(prefix + spec.name, f"`{prefix}{spec.name}` must be >= 1")


def _short(name: str, value: str, limit: int, *, empty_ok: bool = False) -> None:
    if len(value) > limit or (not value and not empty_ok):
        raise invalid(name, f"`{name}` must be 1..{limit} characters, got {len(value)}")


def _action(msg: Action, max_prompt_chars: int) -> None:
    if len(msg.keys) > MAX_KEYS:
        raise invalid("keys", f"`keys` may hold at most {MAX_KEYS} keys, got {len(msg.keys)}")
    for key in msg.keys:
        _short("keys", key, MAX_KEY_CHARS)
    if msg.axes is not None and len(msg.axes) > MAX_AXES:
        raise invalid("axes", f"`axes` may hold at most {MAX_AXES} values, got {len(msg.axes)}")


def _direct(msg: Direct, max_prompt_chars: int) -> None:
    if len(msg.prompt) > max_prompt_chars:
        raise invalid(
            "prompt", f"`prompt` must be at most {max_prompt_chars} characters, got {len(msg.prompt)}"
        )
    if msg.seconds is not None and msg.seconds <= 0:
        raise invalid("seconds", f"`seconds` must be > 0, got {msg.seconds}")


def _hello(msg: Hello, max_prompt_chars: int) -> None:
    if msg.client is not None:
        _short("client", msg.client, MAX_NAME_CHARS, empty_ok=True)


def _frame(msg: Frame, max_prompt_chars: int) -> None:
    if msg.fmt != "rgb24":
        raise invalid("fmt", f"`fmt` must be 'rgb24', got {msg.fmt[:32]!r}")
    if len(msg.data) != msg.w * msg.h * 3:
        raise invalid("data", f"`data` must be w*h*3 = {msg.w * msg.h * 3} bytes, got {len(msg.data)}")


def _init(msg: Init, max_prompt_chars: int) -> None:
    _short("codec", msg.codec, MAX_NAME_CHARS)


def _segment_end(msg: SegmentEnd, max_prompt_chars: int) -> None:
    if msg.status not in SEGMENT_STATUSES:
        raise invalid(
            "status", f"`status` must be one of {', '.join(SEGMENT_STATUSES)}, got {msg.status[:32]!r}"
        )


def _error(msg: Error, max_prompt_chars: int) -> None:
    _short("code", msg.code, MAX_NAME_CHARS)


MAX_LABEL_CHARS = 64  # a co-player's label in `presence`


def _presence(msg: Presence, max_prompt_chars: int) -> None:
    if len(msg.players) > MAX_PLAYERS:
        raise invalid("players", f"`players` may hold at most {MAX_PLAYERS} seats, got {len(msg.players)}")
    for i, seat in enumerate(msg.players):
        where = f"players[{i}]"
        player, label, connected = seat.get("player"), seat.get("label", ""), seat.get("connected")
        if type(player) is not int or not 0 <= player < MAX_PLAYERS:
            raise invalid(f"{where}.player", f"`{where}.player` must be an integer in [0, {MAX_PLAYERS - 1}]")
        if type(label) is not str or len(label) > MAX_LABEL_CHARS:
            raise invalid(f"{where}.label", f"`{where}.label` must be a string of at most {MAX_LABEL_CHARS} "
                          "characters")
        if type(connected) is not bool:
            raise invalid(f"{where}.connected", f"`{where}.connected` must be a boolean")


_TYPE_RULES: dict[str, Callable[[Any, int], None]] = {
    "action": _action,
    "direct": _direct,
    "hello": _hello,
    "frame": _frame,
    "init": _init,
    "segment_end": _segment_end,
    "error": _error,
    "presence": _presence,
}


def check(msg: Any, *, max_prompt_chars: int) -> None:
    """Raise `invalid_field` naming the first field out of its allowed range."""
    _check_ranges(msg)
    rule = _TYPE_RULES.get(type(msg).T)
    if rule is not None:
        rule(msg, max_prompt_chars)
