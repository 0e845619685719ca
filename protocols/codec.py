"""msgpack encoding and validating decoding of protocol messages (docs/protocol.md, Messages).

`encode` writes one map: `t` first, then the fields in dataclass order, optional fields at
their default (None, or False for `cut`/`disc`) left out, bytes as msgpack bin, floats as
float64. `decode` checks the size before unpacking, unpacks with limits derived from it, and
turns anything that is not a valid message into a `ProtocolError` with the docs/protocol.md code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, overload

import msgpack

from ._fields import SPECS, build, invalid
from ._rules import check
from .errors import ErrorCode, ProtocolError
from .messages import (
    CLIENT_TYPES,
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    SERVER_TYPES,
    ClientMessage,
    Limits,
    Message,
    ServerMessage,
)

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_PROMPT_CHARS", "Expect", "decode", "encode"]

DEFAULT_MAX_BYTES = 65536
DEFAULT_MAX_PROMPT_CHARS = 2000
Expect = Literal["client", "server", "any"]
_EXPECTED_TYPES: dict[str, Mapping[str, type[Message]]] = {
    "client": CLIENT_TYPES,
    "server": SERVER_TYPES,
    "any": MESSAGE_TYPES,
}


def _wire_value(value: Any) -> Any:
    if isinstance(value, Limits):
        return {spec.name: getattr(value, spec.name) for spec in SPECS[Limits]}
    return value


def encode(msg: Message) -> bytes:
    """The msgpack bytes of one message."""
    specs = SPECS.get(type(msg))
    if specs is None:
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"{type(msg).__name__} is not a protocol message")
    out: dict[str, Any] = {"t": msg.T}
    for spec in specs:
        value = getattr(msg, spec.name)
        if value is None or (spec.omit_when_false and value is False):
            continue
        out[spec.name] = _wire_value(value)
    try:
        return msgpack.packb(out, use_bin_type=True)  # type: ignore[no-any-return]
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(ErrorCode.INVALID_FIELD, f"`{msg.T}` cannot be encoded: {exc}") from exc


def _unpack(data: bytes | bytearray | memoryview, max_bytes: int) -> Any:
    try:
        return msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=True,
            use_list=True,
            max_bin_len=max_bytes,
            max_str_len=max_bytes,
            max_array_len=max_bytes,
            max_map_len=max_bytes // 2,
            max_ext_len=0,
        )
    except (ValueError, msgpack.UnpackException) as exc:  # every msgpack failure is a ValueError
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"not a msgpack message: {exc}") from exc


@overload
def decode(
    data: bytes | bytearray | memoryview,
    *,
    max_bytes: int = ...,
    expect: Literal["client"],
    max_prompt_chars: int = ...,
) -> ClientMessage: ...
@overload
def decode(
    data: bytes | bytearray | memoryview,
    *,
    max_bytes: int = ...,
    expect: Literal["server"],
    max_prompt_chars: int = ...,
) -> ServerMessage: ...
@overload
def decode(
    data: bytes | bytearray | memoryview,
    *,
    max_bytes: int = ...,
    expect: Expect = ...,
    max_prompt_chars: int = ...,
) -> Message: ...
def decode(
    data: bytes | bytearray | memoryview,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    expect: Expect = "any",
    max_prompt_chars: int = DEFAULT_MAX_PROMPT_CHARS,
) -> Message:
    """The message in `data`, or a `ProtocolError`.

    `expect="client"` (the server's side) accepts only client->server types, `"server"` (a
    client's side) only server->client types.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"a message is binary, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise ProtocolError(ErrorCode.TOO_LARGE, f"message is {len(data)} bytes, the limit is {max_bytes}")
    raw = _unpack(data, max_bytes)
    if type(raw) is not dict:
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"a message is a msgpack map, got {type(raw).__name__}")
    t = raw.get("t")
    if type(t) is not str:
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, "a message needs a string `t` naming its type", "t")
    cls = _EXPECTED_TYPES[expect].get(t)
    if cls is None:
        if t in MESSAGE_TYPES:
            sender, other = ("server", "client") if expect == "client" else ("client", "server")
            reason = f"{t!r} is a {sender} message; a {other} may not send it"
        else:
            reason = f"unknown message type {t[:32]!r}"
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, reason, "t")
    if "v" in raw and cls.T in ("hello", "welcome"):
        _check_version(raw["v"])
    msg: Message = build(cls, raw)
    check(msg, max_prompt_chars=max_prompt_chars)
    return msg


def _check_version(v: Any) -> None:
    if type(v) is not int:
        raise invalid("v", f"`v` must be an integer, got {type(v).__name__}")
    if v != PROTOCOL_VERSION:
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"protocol version {v} is not supported; use v={PROTOCOL_VERSION}",
            "v",
        )
