"""The relay: a world session's output taken while its co-players play without its owner.

A session's frames reach its audience (spectators and co-players) only once the owner's transport
has reported them on its wire (`Session.on_sent`): so the audience never sees a frame the owner did
not. With the owner away and a co-player still connected the world keeps generating (docs/protocol.md,
"Co-play"), and something must take the output in the owner's place: this task does what the
owner's WebSocket writer does, with no wire. It hands each chunk out in order, waits for the
store's position before the chunk leaves (the crash-safe time of every chunk), and reports each
frame of the current generation sent at once (the owner's WebSocket sends as soon as a chunk is
handed out too; generation itself stays paced by the session's playback clock, and a WebRTC
co-player's stream paces its frames to their pts).

It runs while `relaying` holds (no owner connection, a co-player connected, a live world session)
and ends by itself when the owner comes back (its connection takes the output over), the last
co-player leaves or the session ends; each of those sets the output's event, so it never waits
on an outbox nobody fills.
"""

from __future__ import annotations

from typing import Any, Protocol

from sessiond.session.output import OutputStream
from transports.interface import OutChunk, OutFrame

__all__ = ["Relayed", "relay"]


class Relayed(Protocol):
    """What the relay needs of its session (`sessiond.session.session.Session`)."""

    out: OutputStream

    @property
    def relaying(self) -> bool: ...

    async def reserve(self, chunk: OutChunk) -> None: ...

    def on_sent(self, frame: OutFrame) -> None: ...

    def handed(self, message: Any) -> None: ...


async def relay(session: Relayed) -> int:
    """Take `session`'s output until it stops relaying; returns the frames it reported sent."""
    out = session.out
    sent = 0
    while session.relaying:
        item = out.take()
        if item is None:
            out.event.clear()
            await out.event.wait()
            continue
        if not isinstance(item, OutChunk):
            session.handed(item)  # the owner's control queue is nobody's now; markers reach the audience
            continue
        await session.reserve(item)
        for frame in item.frames:
            # the owner came back (a reconnect drops what was handed) or output was dropped meanwhile
            if not session.relaying or frame.generation != out.generation:
                break
            session.on_sent(frame)
            sent += 1
    return sent
