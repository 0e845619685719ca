"""The small session interface every transport needs; sessiond implements it.

A transport (raw WebSocket, fMP4 over WebSocket, WebRTC) attaches to a session as one
*connection*: it hands the client's decoded messages in with :meth:`SessionPort.submit` and
pulls, in order, everything the session wants that connection to carry with
:meth:`SessionPort.next_output`: chunks of frames and protocol messages (acks,
segment_start/end, errors, stats). Frames carry the generation they were made in; a
transport drops any frame whose generation is older than :meth:`SessionPort.generation`
before it reaches the wire, and reports each frame it actually put on the wire with
:meth:`SessionPort.mark_sent`, which is what an interrupt's ack is computed from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from protocols.messages import ClientMessage

__all__ = ["MediaPacker", "OutChunk", "OutFrame", "SessionPort", "WebRTCGatewayProtocol"]


@dataclass(frozen=True)
class OutFrame:
    pts: int  # 90 kHz, the session's constant-frame-rate timeline
    idx: int  # n-th frame ever sent on the session (from 0)
    segment: int
    action_seq: int  # newest action this frame was conditioned on, -1 if none
    disc: bool  # first frame after an interrupt, flush, cut or restart
    generation: int
    rgb: np.ndarray  # uint8 (height, width, 3)
    players: tuple[int, ...] | None = None  # co-play: newest action of each player applied (-1 none)


@dataclass(frozen=True)
class OutChunk:
    """The frames of one engine chunk (or a part of one), in order."""

    frames: tuple[OutFrame, ...]


class SessionPort(Protocol):
    """One connection's view of a session."""

    session_id: str
    width: int
    height: int
    fps: int

    def generation(self) -> int:
        """The current output generation; frames of older generations must not be sent."""
        ...

    def submit(self, message: ClientMessage) -> None:
        """A decoded client message (a protocols message dataclass); handled at once."""
        ...

    async def next_output(self) -> OutChunk | Any | None:
        """The next chunk or protocol message for this connection; None once the session or
        the connection is closed."""
        ...

    def mark_sent(self, frame: OutFrame) -> None:
        """The frame is on the wire (bytes handed to the socket / RTP packetizer)."""
        ...

    def close(self) -> None:
        """The connection went away; the session itself lives on."""
        ...


class MediaPacker(Protocol):
    """Turns frames into the WebSocket media messages of one `media=` mode.

    raw: one `frame` message per frame. fmp4: an `init` message first, then `media`
    messages (moof+mdat). `pack` is CPU work: callers run it in an executor, never on the
    event loop. One packer per connection (or shared per session stream by its owner).
    """

    media: str  # "raw" | "fmp4"

    def start(self) -> list[Any]:
        """Messages to send before any media (fmp4: [Init]); [] for raw."""
        ...

    def pack(self, chunk: OutChunk) -> list[Any]:
        """Protocol messages carrying these frames (a key frame first after `disc`)."""
        ...


class WebRTCGatewayProtocol(Protocol):
    """What the daemon calls for `POST /v1/sessions/{sid}/webrtc`."""

    async def answer(self, port: SessionPort, sdp: str, type_: str) -> tuple[str, str]:
        """SDP offer in, (sdp, type) answer out; raises protocols.errors.ProtocolError
        (invalid_field for a malformed offer or one without video, conflict for a second
        offer on a session that already has a live peer)."""
        ...

    async def close_session(self, session_id: str) -> None: ...

    async def shutdown(self) -> None: ...
