"""Fuzzing: whatever arrives, decode returns a valid message or raises ProtocolError, within
bounded memory; hostile 64 KiB inputs are rejected by limits, not by exhausting the machine."""

from __future__ import annotations

import random
import struct
import tracemalloc
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocols.codec import decode, encode
from protocols.errors import ErrorCode, ProtocolError
from protocols.messages import Message
from tests.protocols.strategies import any_message, msgpack_values, wire_maps

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KIB_64 = 65536


def decodes_cleanly(data: bytes, **kwargs: Any) -> Message | ProtocolError:
    """The one contract: a message that re-encodes to itself, or a ProtocolError."""
    try:
        msg = decode(data, **kwargs)
    except ProtocolError as err:
        assert isinstance(err.code, ErrorCode)
        return err
    again = encode(msg)
    assert encode(decode(again, max_bytes=max(KIB_64, len(again)))) == again
    return msg


@FUZZ
@given(st.binary(max_size=KIB_64))
def test_random_bytes_decode_to_a_message_or_a_protocol_error(data: bytes) -> None:
    decodes_cleanly(data)


PREFIXES = [
    b"",
    b"\x81\xa1t",
    b"\x84\xa1t\xa6action\xa3seq\x01\xa2ts\x00\xa4keys",
    b"\x82\xa1t\xa5frame\xa4data\xc5\xff",
]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(PREFIXES), st.integers(0, 2**64), st.integers(KIB_64 - 1024, KIB_64))
def test_random_64_kib_inputs_decode_to_a_message_or_a_protocol_error(
    prefix: bytes, seed: int, size: int
) -> None:
    data = prefix + random.Random(seed).randbytes(size - len(prefix))
    decodes_cleanly(data)


@FUZZ
@given(st.binary(max_size=64).map(lambda tail: b"\x81\xa1t" + tail))
def test_random_bytes_after_a_type_key_decode_to_a_message_or_a_protocol_error(data: bytes) -> None:
    decodes_cleanly(data)


@FUZZ
@given(wire_maps(), st.sampled_from(["any", "client", "server"]))
def test_random_maps_decode_to_a_message_or_a_protocol_error(raw: dict[str, Any], expect: str) -> None:
    decodes_cleanly(msgpack.packb(raw), max_bytes=1 << 20, expect=expect)


@FUZZ
@given(any_message(), st.data())
def test_valid_messages_with_one_field_mutated_decode_to_a_message_or_a_protocol_error(
    msg: Message, data: st.DataObject
) -> None:
    raw = msgpack.unpackb(encode(msg), raw=False)
    key = data.draw(st.sampled_from(sorted(raw)))
    if data.draw(st.booleans()):
        del raw[key]
    else:
        raw[key] = data.draw(msgpack_values)
    decodes_cleanly(msgpack.packb(raw), max_bytes=1 << 20)


@FUZZ
@given(msgpack_values)
def test_random_msgpack_values_decode_to_a_message_or_a_protocol_error(value: Any) -> None:
    decodes_cleanly(msgpack.packb(value), max_bytes=1 << 20)


def _padded(prefix: bytes) -> bytes:
    return prefix + b"\xc0" * (KIB_64 - len(prefix))


def _map_of_many_keys() -> bytes:
    count = 5000
    body = b"".join(b"\xa5" + f"k{i:04d}".encode() + b"\xc0" for i in range(count))
    return b"\xde" + struct.pack(">H", count) + body


def _action_with_many_keys() -> bytes:
    keys = [chr(0x61 + i % 26) for i in range(20000)]
    return msgpack.packb({"t": "action", "seq": 1, "ts": 1.5, "keys": keys})  # type: ignore[no-any-return]


ADVERSARIAL: dict[str, tuple[bytes, ErrorCode]] = {
    "array_declaring_4G_items": (_padded(b"\xdd\xff\xff\xff\xff"), ErrorCode.BAD_MESSAGE),
    "map_declaring_4G_pairs": (_padded(b"\xdf\xff\xff\xff\xff"), ErrorCode.BAD_MESSAGE),
    "str_declaring_4G_bytes": (_padded(b"\xdb\xff\xff\xff\xff"), ErrorCode.BAD_MESSAGE),
    "bin_declaring_4G_bytes": (_padded(b"\xc6\xff\xff\xff\xff"), ErrorCode.BAD_MESSAGE),
    "ext_declaring_4G_bytes": (_padded(b"\xc9\xff\xff\xff\xff\x01"), ErrorCode.BAD_MESSAGE),
    "map_key_declaring_4G_bytes": (_padded(b"\x81\xdb\xff\xff\xff\xff"), ErrorCode.BAD_MESSAGE),
    "arrays_nested_64k_deep": (b"\x91" * KIB_64, ErrorCode.BAD_MESSAGE),
    "maps_nested_21k_deep": ((b"\x81\xa1t" * (KIB_64 // 3))[:KIB_64], ErrorCode.BAD_MESSAGE),
    "array_of_65533_nils": (b"\xdc\xff\xfd" + b"\xc0" * 65533, ErrorCode.BAD_MESSAGE),
    "map_of_5000_keys_without_t": (_map_of_many_keys(), ErrorCode.UNKNOWN_TYPE),
    "action_with_20000_keys": (_action_with_many_keys(), ErrorCode.INVALID_FIELD),
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_hostile_64_kib_input_is_rejected_within_bounded_memory(name: str) -> None:
    data, code = ADVERSARIAL[name]
    assert len(data) <= KIB_64
    peaks = []
    for _ in range(3):  # tracemalloc counts every thread: the least of three leaves out another's burst
        tracemalloc.start()
        try:
            with pytest.raises(ProtocolError) as info:
                decode(data)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert info.value.code is code
        peaks.append(peak)
    assert min(peaks) < 4 * 1024 * 1024, peaks  # bytes: a few times the input, never what the input declares
