"""Every message of docs/protocol.md as a frozen dataclass; `T` is its `t` discriminator.

Field order is the wire key order (after `t`), so encodings are deterministic and the same in
every implementation (see protocols/README.md). Optional fields default to None (or False
for the `cut`/`disc` flags) and are left out of the encoding at that default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "CLIENT_TYPES",
    "MAX_PLAYERS",
    "MESSAGE_TYPES",
    "PROTOCOL_VERSION",
    "SEGMENT_STATUSES",
    "SERVER_TYPES",
    "Ack",
    "Action",
    "ClientMessage",
    "Direct",
    "Error",
    "Flush",
    "Frame",
    "FramesInfo",
    "Hello",
    "Init",
    "Interrupt",
    "Limits",
    "Media",
    "Message",
    "Moved",
    "Pause",
    "Picture",
    "Ping",
    "Pong",
    "Presence",
    "Received",
    "Resume",
    "SegmentEnd",
    "SegmentStart",
    "ServerMessage",
    "Stats",
    "Welcome",
]

PROTOCOL_VERSION = 1
SEGMENT_STATUSES = ("done", "interrupted", "failed")
MAX_PLAYERS = 8  # co-players of one world session (extension), the owner included


@dataclass(frozen=True)
class Limits:
    """What the server enforces on this connection; sent in `welcome`."""

    max_message_bytes: int = 65536
    max_actions_per_s: int = 240
    max_prompt_chars: int = 2000
    window_frames: int = 16  # frames sent but not yet `received`; the server passes 1 s of its fps


# ---- client -> server ----------------------------------------------------------------------


@dataclass(frozen=True)
class Hello:
    T: ClassVar[str] = "hello"
    v: int
    client: str | None = None


@dataclass(frozen=True)
class Action:
    T: ClassVar[str] = "action"
    seq: int  # strictly increasing per session; an old or repeated seq is ignored
    ts: float  # client clock, ms
    keys: tuple[str, ...]  # held keys (latest wins)
    mouse: tuple[float, float] | None = None  # (dx, dy) since the previous action
    buttons: int | None = None
    axes: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Direct:
    T: ClassVar[str] = "direct"
    id: int
    prompt: str
    seconds: float | None = None
    seed: int | None = None
    cut: bool = False


@dataclass(frozen=True)
class Interrupt:
    T: ClassVar[str] = "interrupt"
    id: int


@dataclass(frozen=True)
class Flush:
    T: ClassVar[str] = "flush"
    id: int


@dataclass(frozen=True)
class Pause:
    T: ClassVar[str] = "pause"
    id: int


@dataclass(frozen=True)
class Resume:
    T: ClassVar[str] = "resume"
    id: int


@dataclass(frozen=True)
class Received:
    T: ClassVar[str] = "received"
    idx: int  # frames up to and including idx have arrived


@dataclass(frozen=True)
class Ping:
    T: ClassVar[str] = "ping"
    id: int
    ts: float


# ---- server -> client ----------------------------------------------------------------------


@dataclass(frozen=True)
class Welcome:
    T: ClassVar[str] = "welcome"
    v: int
    session: dict[str, Any]  # the create response minus `token`
    limits: Limits


@dataclass(frozen=True)
class Frame:
    """media=raw: one RGB frame."""

    T: ClassVar[str] = "frame"
    pts: int  # 90 kHz
    idx: int  # n-th frame ever sent on the session
    w: int
    h: int
    fmt: str  # "rgb24"
    data: bytes  # w * h * 3 bytes, row-major RGB
    segment: int
    action_seq: int  # newest action this frame was conditioned on, -1 if none
    disc: bool = False
    # extension (co-play): players[k] = newest action of player k this frame applied (-1 none);
    # `action_seq` is then the receiving player's own entry
    players: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Init:
    """media=fmp4: the init segment (ftyp+moov), once, before any `media`."""

    T: ClassVar[str] = "init"
    codec: str  # the MSE codec string, e.g. avc1.42C01E
    data: bytes


@dataclass(frozen=True)
class Media:
    """media=fmp4: n frames from idx as one moof+mdat."""

    T: ClassVar[str] = "media"
    pts: int
    dur: int  # 90 kHz
    idx: int
    n: int
    segment: int
    action_seq: int
    data: bytes
    disc: bool = False
    players: tuple[int, ...] | None = None  # extension (co-play), as in `frame`


@dataclass(frozen=True)
class SegmentStart:
    T: ClassVar[str] = "segment_start"
    segment: int
    pts: int
    re: int | None = None  # id of the `direct` that started it
    # extension: start playing the segment's first frame this many ms after receiving this
    # message, so that it plays to its end without a stall (left out: play when frames arrive)
    start_after_ms: int | None = None


@dataclass(frozen=True)
class SegmentEnd:
    T: ClassVar[str] = "segment_end"
    segment: int
    pts: int
    frames: int
    status: str  # one of SEGMENT_STATUSES
    re: int | None = None


@dataclass(frozen=True)
class Ack:
    T: ClassVar[str] = "ack"
    re: int
    pts: int | None = None  # interrupt/flush: last pts that was or will be sent


@dataclass(frozen=True)
class Pong:
    T: ClassVar[str] = "pong"
    re: int
    ts: float


@dataclass(frozen=True)
class Error:
    T: ClassVar[str] = "error"
    code: str  # an ErrorCode value
    message: str
    fatal: bool  # the server closes this connection after it
    re: int | None = None


@dataclass(frozen=True)
class Stats:
    T: ClassVar[str] = "stats"
    fps: float | None = None
    queue: int | None = None
    gen_ms: float | None = None
    rtf: float | None = None
    lead_ms: float | None = None  # extension, world: how long before its first frame plays a chunk is begun now


@dataclass(frozen=True)
class FramesInfo:
    """WebRTC `control` channel: describes the frames of one chunk put on the video track."""

    T: ClassVar[str] = "frames"
    idx: int
    n: int
    pts: int
    segment: int
    action_seq: int
    disc: bool = False
    players: tuple[int, ...] | None = None  # extension (co-play), as in `frame`


@dataclass(frozen=True)
class Moved:
    """*Extension*: the session now lives elsewhere (its worker drains); reconnect to these URLs.
    The server closes this connection right after it; pts continue on the new connection."""

    T: ClassVar[str] = "moved"
    ws_url: str
    webrtc_url: str


@dataclass(frozen=True)
class Presence:
    """*Extension* (co-play): who is playing a world session and how many watch it; sent to every
    connection of the session when either changes. `players`: one map per seat,
    {player: int (0 = the owner), label: str, connected: bool}, in player order."""

    T: ClassVar[str] = "presence"
    players: tuple[dict[str, Any], ...]
    spectators: int


@dataclass(frozen=True)
class Picture:
    """*Extension*: the served model's own check of its picture changed verdict (sent on each
    change): `ok` false says the picture degraded (`why` in words), true that it recovered.
    `avatar`: share of recent samples with the avatar visible; `pattern` against `bound`: how
    strongly a repeating pattern stands out. Only models that can check themselves send it."""

    T: ClassVar[str] = "picture"
    ok: bool
    why: str | None = None
    avatar: float | None = None
    pattern: float | None = None
    bound: float | None = None


ClientMessage = Hello | Action | Direct | Interrupt | Flush | Pause | Resume | Received | Ping
ServerMessage = (
    Welcome | Frame | Init | Media | SegmentStart | SegmentEnd | Ack | Pong | Error | Stats | FramesInfo | Moved
    | Picture | Presence
)
Message = ClientMessage | ServerMessage

CLIENT_TYPES: dict[str, type[ClientMessage]] = {
    cls.T: cls for cls in (Hello, Action, Direct, Interrupt, Flush, Pause, Resume, Received, Ping)
}
SERVER_TYPES: dict[str, type[ServerMessage]] = {
    cls.T: cls
    for cls in (Welcome, Frame, Init, Media, SegmentStart, SegmentEnd, Ack, Pong, Error, Stats, FramesInfo, Moved,
                Picture, Presence)
}
MESSAGE_TYPES: dict[str, type[Message]] = {**CLIENT_TYPES, **SERVER_TYPES}
