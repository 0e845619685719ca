"""Every error the codec can raise, provoked: the docs/protocol.md code and the field it names."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from protocols.codec import decode, encode
from protocols.errors import ErrorCode, ProtocolError
from protocols.messages import Direct, Hello

ACTION = {"t": "action", "seq": 1, "ts": 10.5, "keys": ["w"]}
FRAME = {
    "t": "frame",
    "pts": 0,
    "idx": 0,
    "w": 2,
    "h": 1,
    "fmt": "rgb24",
    "data": b"\x00" * 6,
    "segment": 0,
    "action_seq": -1,
}


def provoke(data: Any, **kwargs: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        decode(data, **kwargs)
    return info.value


def packed(base: dict[str, Any], **changes: Any) -> bytes:
    return msgpack.packb({**base, **changes})  # type: ignore[no-any-return]


def without(base: dict[str, Any], key: str) -> bytes:
    return msgpack.packb({k: v for k, v in base.items() if k != key})  # type: ignore[no-any-return]


# ---- too_large, checked before anything is unpacked ---------------------------------------


def test_a_message_over_the_size_limit_is_too_large_even_if_it_is_not_msgpack() -> None:
    err = provoke(b"\xc1" * 65537)
    assert (err.code, err.field) == (ErrorCode.TOO_LARGE, None)
    assert "65537" in err.message and "65536" in err.message


def test_the_size_limit_is_configurable() -> None:
    data = packed(ACTION)
    assert provoke(data, max_bytes=len(data) - 1).code is ErrorCode.TOO_LARGE
    assert decode(data, max_bytes=len(data)).T == "action"


# ---- bad_message ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"", b"\xc1", b"\x82\xa1t", b"\x81\xa1t\xa4ping\x00", b"\xa2\xff\xfe", b"\x81\x01\x02", b"\xd4\x01\x00"],
    ids=["empty", "reserved_byte", "truncated", "trailing_bytes", "invalid_utf8", "int_map_key", "ext_type"],
)
def test_bytes_that_are_not_one_msgpack_value_are_a_bad_message(data: bytes) -> None:
    assert provoke(data).code is ErrorCode.BAD_MESSAGE


@pytest.mark.parametrize(
    "value", [[1, 2], "hello", 7, None, b"\x81"], ids=["array", "str", "int", "nil", "bin"]
)
def test_a_msgpack_value_that_is_not_a_map_is_a_bad_message(value: Any) -> None:
    assert provoke(msgpack.packb(value)).code is ErrorCode.BAD_MESSAGE


def test_text_instead_of_bytes_is_a_bad_message() -> None:
    assert provoke("\x81\xa1t\xa4ping").code is ErrorCode.BAD_MESSAGE


# ---- unknown_type -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "t", [None, 5, b"ping", "teleport", "Ping"], ids=["missing", "int", "bin", "unknown", "case"]
)
def test_a_missing_or_unknown_t_is_an_unknown_type(t: Any) -> None:
    body = {"id": 1, "ts": 1.5} if t is None else {"t": t, "id": 1, "ts": 1.5}
    err = provoke(msgpack.packb(body))
    assert (err.code, err.field) == (ErrorCode.UNKNOWN_TYPE, "t")


def test_the_server_rejects_a_server_message_type_from_a_client() -> None:
    err = provoke(packed(FRAME), expect="client")
    assert (err.code, err.field) == (ErrorCode.UNKNOWN_TYPE, "t")
    assert err.message == "'frame' is a server message; a client may not send it"


# ---- invalid_field: presence and type ------------------------------------------------------------


@pytest.mark.parametrize("field", ["seq", "ts", "keys"])
def test_a_missing_required_field_is_invalid_and_named(field: str) -> None:
    err = provoke(without(ACTION, field))
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, field)
    assert err.message == f"`{field}` is required in `action`"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("seq", True),
        ("seq", 1.0),
        ("seq", "1"),
        ("ts", False),
        ("ts", "now"),
        ("keys", "w"),
        ("keys", ["w", 1]),
        ("mouse", {"dx": 1}),
        ("buttons", 1.5),
        ("axes", [0.5, None]),
    ],
)
def test_a_wrong_typed_action_field_is_invalid_and_named(field: str, value: Any) -> None:
    err = provoke(packed(ACTION, **{field: value}))
    assert err.code is ErrorCode.INVALID_FIELD
    assert err.field in (field, f"{field}[1]")


# ---- invalid_field: values -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"seq": -1}, "seq"),
        ({"seq": 2**53}, "seq"),
        ({"ts": float("nan")}, "ts"),
        ({"ts": float("inf")}, "ts"),
        ({"mouse": [1.0]}, "mouse"),
        ({"mouse": [1.0, 2.0, 3.0]}, "mouse"),
        ({"mouse": [1.0, float("-inf")]}, "mouse[1]"),
        ({"keys": [""]}, "keys"),
        ({"keys": ["k" * 33]}, "keys"),
        ({"keys": [f"k{i}" for i in range(65)]}, "keys"),
        ({"buttons": -1}, "buttons"),
        ({"axes": [0.0] * 17}, "axes"),
    ],
    ids=[
        "negative_seq",
        "seq_beyond_2^53",
        "nan_ts",
        "inf_ts",
        "mouse_of_1",
        "mouse_of_3",
        "inf_mouse",
        "empty_key",
        "long_key",
        "65_keys",
        "negative_buttons",
        "17_axes",
    ],
)
def test_an_out_of_range_action_value_is_invalid_and_named(changes: dict[str, Any], field: str) -> None:
    err = provoke(packed(ACTION, **changes))
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, field)


def test_a_prompt_over_the_limit_is_invalid_and_the_limit_is_configurable() -> None:
    data = encode(Direct(id=1, prompt="x" * 2001))
    err = provoke(data)
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, "prompt")
    assert decode(data, max_prompt_chars=2001) == Direct(id=1, prompt="x" * 2001)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"fmt": "rgba"}, "fmt"),
        ({"data": b"\x00" * 5}, "data"),
        ({"w": 0}, "w"),
        ({"h": 16385}, "h"),
        ({"action_seq": -2}, "action_seq"),
        ({"pts": -3000}, "pts"),
        ({"disc": 1}, "disc"),
    ],
    ids=["fmt_rgba", "data_short_of_w_h_3", "zero_w", "h_over_16384", "action_seq_below_-1", "negative_pts",
         "disc_an_int"],
)
def test_an_invalid_frame_value_is_invalid_and_named(changes: dict[str, Any], field: str) -> None:
    err = provoke(packed(FRAME, **changes))
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, field)


def test_a_segment_end_status_outside_done_interrupted_failed_is_invalid() -> None:
    err = provoke(packed({"t": "segment_end", "segment": 0, "pts": 0, "frames": 0, "status": "ok"}))
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, "status")
    assert "done, interrupted, failed" in err.message


# ---- one input, its code and the field it names ------------------------------------------------------

WELCOME = {"t": "welcome", "v": 1, "session": {}, "limits": {}}
MEDIA = {"t": "media", "pts": 0, "dur": 3000, "idx": 0, "n": 1, "segment": 0, "action_seq": -1, "data": b""}

CODED = [  # (bytes, the side that decodes, code, field)
    pytest.param(packed(ACTION), "server", ErrorCode.UNKNOWN_TYPE, "t", id="client_type_from_the_server"),
    pytest.param(packed({"t": "hello", "v": 2}), "any", ErrorCode.UNSUPPORTED_VERSION, "v", id="hello_v2"),
    pytest.param(packed(WELCOME, v=0), "server", ErrorCode.UNSUPPORTED_VERSION, "v", id="welcome_v0"),
    pytest.param(packed({"t": "hello", "v": "1"}), "any", ErrorCode.INVALID_FIELD, "v", id="version_a_string"),
    pytest.param(packed(ACTION, seq=None), "any", ErrorCode.INVALID_FIELD, "seq", id="nil_counts_as_missing"),
    pytest.param(packed({"t": "interrupt", "id": True}), "any", ErrorCode.INVALID_FIELD, "id", id="bool_id"),
    pytest.param(packed(FRAME, data="\x00" * 6), "server", ErrorCode.INVALID_FIELD, "data",
                 id="str_where_bytes_are_expected"),
    pytest.param(packed(WELCOME, limits={"window_frames": "30"}), "any", ErrorCode.INVALID_FIELD,
                 "limits.window_frames", id="limits_field_named_with_its_path"),
    pytest.param(packed(WELCOME, session={b"id": 1}), "any", ErrorCode.INVALID_FIELD, "session",
                 id="session_key_not_a_string"),
    pytest.param(packed({"t": "direct", "id": 1, "prompt": "p", "seconds": 0}), "any", ErrorCode.INVALID_FIELD,
                 "seconds", id="direct_for_zero_seconds"),
    pytest.param(encode(Hello(v=1, client="c" * 257)), "any", ErrorCode.INVALID_FIELD, "client",
                 id="client_name_over_256_chars"),
    pytest.param(packed(MEDIA, n=0), "any", ErrorCode.INVALID_FIELD, "n", id="media_of_zero_frames"),
    pytest.param(packed(WELCOME, limits={"window_frames": 0}), "any", ErrorCode.INVALID_FIELD,
                 "limits.window_frames", id="zero_window"),
    pytest.param(packed({"t": "stats", "rtf": -0.5}), "any", ErrorCode.INVALID_FIELD, "rtf", id="negative_stats"),
]


@pytest.mark.parametrize(("data", "expect", "code", "field"), CODED)
def test_an_input_gets_its_code_and_names_its_field(data: bytes, expect: str, code: ErrorCode, field: str) -> None:
    err = provoke(data, expect=expect)
    assert (err.code, err.field) == (code, field)


# ---- encode -------------------------------------------------------------------------------------------


def test_encoding_something_that_is_not_a_message_is_an_unknown_type() -> None:
    with pytest.raises(ProtocolError) as info:
        encode({"t": "ping"})  # type: ignore[arg-type]
    assert info.value.code is ErrorCode.UNKNOWN_TYPE


def test_encoding_a_field_msgpack_cannot_hold_is_an_invalid_field() -> None:
    with pytest.raises(ProtocolError) as info:
        encode(Direct(id=2**64, prompt="p"))
    assert info.value.code is ErrorCode.INVALID_FIELD
