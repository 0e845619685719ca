"""Round-trips: every valid message of every type survives encode -> decode unchanged."""

from __future__ import annotations

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.codec import decode, encode
from protocols.messages import CLIENT_TYPES, MESSAGE_TYPES, SERVER_TYPES, Action, Direct, Message, Received
from tests.protocols.strategies import MESSAGE_STRATEGIES, any_message

FAST = settings(max_examples=60, deadline=None)


def test_there_is_a_strategy_for_every_message_type() -> None:
    assert set(MESSAGE_STRATEGIES) == set(MESSAGE_TYPES)


@FAST
@given(st.sampled_from(sorted(MESSAGE_STRATEGIES)).flatmap(lambda t: MESSAGE_STRATEGIES[t]))
def test_every_type_round_trips(msg: Message) -> None:
    decoded = decode(encode(msg))
    assert type(decoded) is type(msg)
    assert decoded == msg


@FAST
@given(any_message())
def test_encoding_is_deterministic(msg: Message) -> None:
    assert encode(decode(encode(msg))) == encode(msg)


@FAST
@given(any_message())
def test_each_side_accepts_only_its_peers_messages(msg: Message) -> None:
    data = encode(msg)
    if msg.T in CLIENT_TYPES:
        assert decode(data, expect="client") == msg
    else:
        assert msg.T in SERVER_TYPES
        assert decode(data, expect="server") == msg


def test_an_integer_where_a_float_is_expected_decodes_as_that_float() -> None:
    data = msgpack.packb({"t": "action", "seq": 1, "ts": 1000, "keys": ["w"], "mouse": [1, -2]})
    msg = decode(data)
    assert msg == Action(seq=1, ts=1000.0, keys=("w",), mouse=(1.0, -2.0))
    assert isinstance(msg, Action) and msg.mouse is not None
    assert (type(msg.ts), type(msg.mouse[0]), type(msg.mouse[1])) == (float, float, float)


def test_unknown_keys_are_ignored() -> None:
    data = msgpack.packb({"t": "received", "idx": 5, "future_field": [1, 2], "x": {"y": None}})
    assert decode(data) == Received(idx=5)


def test_nil_for_an_optional_field_reads_as_absent() -> None:
    data = msgpack.packb({"t": "direct", "id": 1, "prompt": "p", "seconds": None, "cut": None})
    assert decode(data) == Direct(id=1, prompt="p")
