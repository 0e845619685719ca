"""The messages behind tests/protocols/golden.json, and the JSON view the web client's codec
tests read. Run `python -m tests.protocols.golden_messages` to rewrite golden.json after a
deliberate wire change (then review the diff: the hand-built bytes in test_golden.py must
still agree)."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

from protocols.messages import (
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

__all__ = ["GOLDEN", "GOLDEN_PATH", "wire_view"]

GOLDEN_PATH = Path(__file__).with_name("golden.json")

# Float fields hold non-integral values: a JavaScript encoder writes 5.0 as the integer 5.
GOLDEN: dict[str, Message] = {
    "hello": Hello(v=1),
    "hello_with_client": Hello(v=1, client="web/0.1"),
    "action_keys_only": Action(seq=0, ts=1000.5, keys=()),
    "action_full": Action(
        seq=42, ts=16250.25, keys=("w", "shiftleft"), mouse=(3.5, -1.25), buttons=5, axes=(0.5, -0.75)
    ),
    "direct_prompt_only": Direct(id=1, prompt="a lighthouse at dusk"),
    "direct_full": Direct(id=2, prompt="cut to the harbour, rain", seconds=4.5, seed=1234, cut=True),
    "interrupt": Interrupt(id=3),
    "flush": Flush(id=4),
    "pause": Pause(id=5),
    "resume": Resume(id=6),
    "received": Received(idx=299),
    "ping": Ping(id=7, ts=12.5),
    "welcome": Welcome(
        v=1,
        session={
            "session_id": "s-1",
            "mode": "world",
            "model": "tiny",
            "width": 2,
            "height": 1,
            "fps": 30,
            "action_space": {"keys": ["w", "a", "s", "d"], "mouse": True, "buttons": 0, "axes": 0},
            "ws_url": "/v1/sessions/s-1/ws",
            "webrtc_url": "/v1/sessions/s-1/webrtc",
        },
        limits=Limits(
            max_message_bytes=65536, max_actions_per_s=240, max_prompt_chars=2000, window_frames=30
        ),
    ),
    "frame": Frame(
        pts=3000, idx=1, w=2, h=1, fmt="rgb24", data=bytes([255, 0, 0, 0, 128, 255]), segment=0, action_seq=41
    ),
    "frame_disc_no_action": Frame(
        pts=0, idx=0, w=1, h=1, fmt="rgb24", data=b"\x10\x20\x30", segment=2, action_seq=-1, disc=True
    ),
    "init": Init(codec="avc1.42C01E", data=b"\x00\x00\x00\x18ftypisom"),
    "media": Media(pts=9000, dur=3000, idx=3, n=1, segment=0, action_seq=7, data=b"\x00\x00\x00\x08moof"),
    "media_disc": Media(pts=12000, dur=9000, idx=4, n=3, segment=1, action_seq=-1, data=b"mdat", disc=True),
    "segment_start": SegmentStart(segment=1, pts=90000, re=2),
    "segment_start_no_direct": SegmentStart(segment=0, pts=0),
    "segment_end": SegmentEnd(segment=1, pts=117000, frames=10, status="interrupted", re=2),
    "ack": Ack(re=1),
    "ack_interrupt": Ack(re=3, pts=99000),
    "pong": Pong(re=7, ts=12.5),
    "error": Error(code="invalid_field", message="`seq` must be an integer, got str", fatal=False, re=9),
    "error_fatal": Error(
        code="unsupported_version", message="protocol version 2 is not supported", fatal=True
    ),
    "stats": Stats(fps=29.5, queue=2, gen_ms=21.25, rtf=0.75),
    "stats_empty": Stats(),
    "frames": FramesInfo(idx=30, n=6, pts=90000, segment=1, action_seq=12),
    "frames_disc": FramesInfo(idx=36, n=6, pts=108000, segment=1, action_seq=-1, disc=True),
    "moved": Moved(ws_url="ws://10.0.0.7:8001/v1/sessions/s-1/ws",
                   webrtc_url="http://10.0.0.7:8001/v1/sessions/s-1/webrtc"),
    "picture": Picture(ok=False, why="the avatar is gone from the centre", avatar=0.333, pattern=21.5, bound=40.5),
    "picture_ok": Picture(ok=True),
}


def _view_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$bin": value.hex()}
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Limits):
        return {f.name: getattr(value, f.name) for f in fields(value)}
    return value


def wire_view(msg: Message) -> dict[str, Any]:
    """The map on the wire, in wire key order, as JSON (bytes as {"$bin": hex})."""
    view: dict[str, Any] = {"t": msg.T}
    for f in fields(msg):
        value = getattr(msg, f.name)
        if value is None or (value is False and f.default is False):
            continue
        view[f.name] = _view_value(value)
    return view


def _write() -> None:
    from protocols.codec import encode

    cases = [
        {"name": name, "message": wire_view(msg), "hex": encode(msg).hex()} for name, msg in GOLDEN.items()
    ]
    doc = {
        "about": "Session protocol v1 golden encodings (docs/protocol.md). Each case: the wire map as JSON "
        '(key order = wire order, bytes as {"$bin": hex}) and its exact msgpack bytes. Rules: one map, '
        "`t` first, fields in the listed order, optional fields left out when null (or false for cut/disc), "
        "smallest integer encodings, floats as float64, bytes as bin, strings as str.",
        "cases": cases,
    }
    GOLDEN_PATH.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    _write()
