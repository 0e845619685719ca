"""Golden bytes: each message type has fixed encodings that every implementation shares."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from protocols.codec import decode, encode
from protocols.messages import MESSAGE_TYPES, Ping
from tests.protocols.golden_messages import GOLDEN, GOLDEN_PATH, wire_view

CASES = json.loads(GOLDEN_PATH.read_text())["cases"]


def test_golden_file_covers_every_message_type_of_both_directions() -> None:
    assert {GOLDEN[case["name"]].T for case in CASES} == set(MESSAGE_TYPES)


def test_golden_file_lists_exactly_the_golden_messages() -> None:
    assert [case["name"] for case in CASES] == list(GOLDEN)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_golden_bytes_decode_to_the_message(case: dict[str, Any]) -> None:
    assert decode(bytes.fromhex(case["hex"])) == GOLDEN[case["name"]]


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_message_encodes_to_the_golden_bytes(case: dict[str, Any]) -> None:
    assert encode(GOLDEN[case["name"]]).hex() == case["hex"]


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_golden_json_view_is_the_message_in_wire_order(case: dict[str, Any]) -> None:
    assert case["message"] == wire_view(GOLDEN[case["name"]])
    assert list(case["message"]) == list(wire_view(GOLDEN[case["name"]]))


def test_ping_bytes_built_by_hand_from_the_msgpack_spec() -> None:
    expected = (
        b"\x83"  # fixmap, 3 entries
        + b"\xa1t"
        + b"\xa4ping"  # "t": "ping" (fixstr)
        + b"\xa2id"
        + b"\x07"  # "id": 7 (positive fixint)
        + b"\xa2ts"
        + b"\xcb"
        + struct.pack(">d", 12.5)  # "ts": 12.5 (float 64, big-endian)
    )
    assert encode(Ping(id=7, ts=12.5)) == expected


def test_frame_bytes_built_by_hand_from_the_msgpack_spec() -> None:
    expected = (
        b"\x89"  # fixmap, 9 entries: disc=False is left out
        + b"\xa1t\xa5frame"
        + b"\xa3pts\xcd\x0b\xb8"  # 3000 as uint 16
        + b"\xa3idx\x01"
        + b"\xa1w\x02"
        + b"\xa1h\x01"
        + b"\xa3fmt\xa5rgb24"
        + b"\xa4data\xc4\x06\xff\x00\x00\x00\x80\xff"  # bin 8 of 6 bytes
        + b"\xa7segment\x00"
        + b"\xaaaction_seq\x29"  # 41
    )
    assert encode(GOLDEN["frame"]) == expected


def test_negative_action_seq_and_true_flag_use_the_smallest_encodings() -> None:
    data = encode(GOLDEN["frames_disc"])
    assert data.endswith(b"\xaaaction_seq\xff\xa4disc\xc3")  # -1 as negative fixint, true
