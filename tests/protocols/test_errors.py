"""The error codes are exactly docs/protocol.md's, and an error carries code, message and field."""

from __future__ import annotations

from protocols.errors import ErrorCode, ProtocolError


def test_error_codes_are_the_thirteen_of_the_protocol_and_forbidden() -> None:
    # forbidden (403) extends the protocol: a spectator's token doing what only players may
    assert [code.value for code in ErrorCode] == [
        "bad_message",
        "unknown_type",
        "invalid_field",
        "too_large",
        "unsupported_version",
        "unauthorized",
        "forbidden",
        "not_found",
        "capacity",
        "rate_limited",
        "conflict",
        "internal",
        "engine_fault",
        "store_unavailable",
    ]


def test_a_protocol_error_carries_code_message_and_field() -> None:
    err = ProtocolError(ErrorCode.INVALID_FIELD, "`seq` must be an integer", "seq")
    assert (err.code, err.message, err.field, str(err)) == (
        ErrorCode.INVALID_FIELD,
        "`seq` must be an integer",
        "seq",
        "invalid_field: `seq` must be an integer",
    )
