"""Hypothesis strategies: valid protocol messages of every type, and arbitrary msgpack values."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from protocols._rules import MAX_INT
from protocols.errors import ErrorCode
from protocols.messages import (
    MESSAGE_TYPES,
    SEGMENT_STATUSES,
    Ack,
    Action,
    Direct,
    Error,
    Flush,
    Frame,
    FramesInfo,
    Hello,
    Init,
    Interrupt,
    Limits,
    Media,
    Message,
    Moved,
    Pause,
    Picture,
    Ping,
    Pong,
    Received,
    Resume,
    SegmentEnd,
    SegmentStart,
    Stats,
    Welcome,
)

__all__ = ["MESSAGE_STRATEGIES", "any_message", "msgpack_values", "wire_maps"]

counts = st.integers(0, MAX_INT)
ids = counts
action_seqs = st.integers(-1, MAX_INT)
finite = st.floats(allow_nan=False, allow_infinity=False)
non_negative = st.floats(min_value=0, allow_nan=False, allow_infinity=False)
short_text = st.text(max_size=20)
key_names = st.text(min_size=1, max_size=32)
optional_bytes = st.binary(max_size=64)

json_like: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | finite
    | short_text
    | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(short_text, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    w, h = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return Frame(
        pts=draw(counts),
        idx=draw(counts),
        w=w,
        h=h,
        fmt="rgb24",
        data=draw(st.binary(min_size=w * h * 3, max_size=w * h * 3)),
        segment=draw(counts),
        action_seq=draw(action_seqs),
        disc=draw(st.booleans()),
    )


MESSAGE_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "hello": st.builds(Hello, v=st.just(1), client=st.none() | short_text),
    "action": st.builds(
        Action,
        seq=counts,
        ts=finite,
        keys=st.lists(key_names, max_size=8).map(tuple),
        mouse=st.none() | st.tuples(finite, finite),
        buttons=st.none() | counts,
        axes=st.none() | st.lists(finite, max_size=16).map(tuple),
    ),
    "direct": st.builds(
        Direct,
        id=ids,
        prompt=st.text(max_size=100),
        seconds=st.none() | st.floats(min_value=0.001, max_value=600),
        seed=st.none() | counts,
        cut=st.booleans(),
    ),
    "interrupt": st.builds(Interrupt, id=ids),
    "flush": st.builds(Flush, id=ids),
    "pause": st.builds(Pause, id=ids),
    "resume": st.builds(Resume, id=ids),
    "received": st.builds(Received, idx=counts),
    "ping": st.builds(Ping, id=ids, ts=finite),
    "welcome": st.builds(
        Welcome,
        v=st.just(1),
        session=st.dictionaries(short_text, json_like, max_size=6),
        limits=st.builds(Limits, *[st.integers(1, MAX_INT)] * 4),
    ),
    "frame": frames(),
    "init": st.builds(Init, codec=st.text(min_size=1, max_size=20), data=optional_bytes),
    "media": st.builds(
        Media,
        pts=counts,
        dur=st.integers(1, MAX_INT),
        idx=counts,
        n=st.integers(1, MAX_INT),
        segment=counts,
        action_seq=action_seqs,
        data=optional_bytes,
        disc=st.booleans(),
    ),
    "segment_start": st.builds(SegmentStart, segment=counts, pts=counts, re=st.none() | ids),
    "segment_end": st.builds(
        SegmentEnd,
        segment=counts,
        pts=counts,
        frames=counts,
        status=st.sampled_from(SEGMENT_STATUSES),
        re=st.none() | ids,
    ),
    "ack": st.builds(Ack, re=ids, pts=st.none() | counts),
    "pong": st.builds(Pong, re=ids, ts=finite),
    "error": st.builds(
        Error,
        code=st.sampled_from([c.value for c in ErrorCode]),
        message=st.text(max_size=80),
        fatal=st.booleans(),
        re=st.none() | ids,
    ),
    "stats": st.builds(
        Stats,
        fps=st.none() | non_negative,
        queue=st.none() | counts,
        gen_ms=st.none() | non_negative,
        rtf=st.none() | non_negative,
    ),
    "frames": st.builds(
        FramesInfo,
        idx=counts,
        n=st.integers(1, MAX_INT),
        pts=counts,
        segment=counts,
        action_seq=action_seqs,
        disc=st.booleans(),
    ),
    "moved": st.builds(Moved, ws_url=st.text(max_size=80), webrtc_url=st.text(max_size=80)),
    "picture": st.builds(Picture, ok=st.booleans(), why=st.none() | st.text(max_size=80),
                         avatar=st.none() | non_negative, pattern=st.none() | non_negative,
                         bound=st.none() | non_negative),
}


def any_message() -> st.SearchStrategy[Message]:
    return st.one_of(*MESSAGE_STRATEGIES.values())


# Arbitrary msgpack values, including the awkward ones: out-of-range ints, nan/inf, bytes.
msgpack_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=30)
    | st.binary(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=8,
)

_FIELD_NAMES = sorted({name for cls in MESSAGE_TYPES.values() for name in cls.__dataclass_fields__})


@st.composite
def wire_maps(draw: st.DrawFn) -> dict[str, Any]:
    """A map that often names a real type and real fields, with values of any msgpack type."""
    out: dict[str, Any] = {}
    if draw(st.integers(0, 9)) > 0:
        out["t"] = draw(st.sampled_from(sorted(MESSAGE_TYPES)) | msgpack_values)
    for name in draw(st.lists(st.sampled_from(_FIELD_NAMES) | st.text(max_size=6), max_size=8)):
        out[name] = draw(msgpack_values)
    return out
