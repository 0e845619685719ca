"""Every bad input of docs/protocol.md's error table a connected client can send, with the code
it gets (the session goes on after each): shared by the WebSocket tests and the test that sends
them through both transports."""

from __future__ import annotations

import msgpack
import pytest

from protocols.messages import Action, Hello

__all__ = ["MALFORMED"]

MALFORMED = [
    pytest.param(b"\xc1", "bad_message", id="not-msgpack"),
    pytest.param(msgpack.packb([1, 2, 3]), "bad_message", id="not-a-map"),
    pytest.param("a text frame", "bad_message", id="text-frame"),
    pytest.param(msgpack.packb({"t": "teleport"}), "unknown_type", id="unknown-t"),
    pytest.param(msgpack.packb({"seq": 1}), "unknown_type", id="no-t"),
    pytest.param(msgpack.packb({"t": "action", "seq": "one", "ts": 0.0, "keys": []}), "invalid_field",
                 id="action-seq-not-an-int"),
    pytest.param(msgpack.packb({"t": "interrupt"}), "invalid_field", id="interrupt-without-id"),
    pytest.param(msgpack.packb({"t": "direct", "id": 5, "prompt": "x" * 2001}), "invalid_field",
                 id="direct-prompt-too-long"),
    pytest.param(msgpack.packb({"t": "ping", "id": 1, "ts": 0.0, "pad": b"\0" * 70_000}), "too_large",
                 id="ping-over-the-size-limit"),
    pytest.param(Action(seq=1, ts=0.0, keys=("z",)), "invalid_field", id="action-key-outside-the-action-space"),
    pytest.param(Action(seq=2, ts=0.0, keys=("w",), axes=(0.1, 0.2, 0.3)), "invalid_field",
                 id="action-with-3-axes-model-has-2"),
    pytest.param(Hello(v=1), "conflict", id="second-hello"),
]
