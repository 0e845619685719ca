"""A session's audience: the spectators watching it, fed from ONE packing per media mode.

Frames enter when the owner's transport reports them on the wire (`Session.on_sent`): the same
idx and pts the owner got, never a frame the owner did not get (so never one of a dropped
generation). The messages spectators also get (segment_start/end, moved) enter in order with
them. Each media mode has one `transports.fanout.SharedPacker`; its packed wire messages go to
every member of that mode, each of which keeps a bounded queue:

- a member holds at most `max_frames` frames queued (plus at most `max_messages` messages);
  on overflow its queued media is dropped (counted as skipped) and it resumes at the next
  place it may start: raw at the next frame, fmp4 at the next fragment beginning with a key
  frame, which is then asked for. Memory per member: references to shared bytes only, at most
  `max_frames` frames' worth (raw: max_frames x width x height x 3 bytes while it lags).
- a member carries its `Access` and its own control deque (pong, errors), so a co-player's
  connection can take its output from here and still have replies of its own.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from protocols.errors import ErrorCode
from protocols.messages import Error, Presence
from sessiond.grants import Access, Role
from sessiond.logs import log_event
from sessiond.session.connection import Connection
from transports.fanout import Packed, SharedPacker
from transports.interface import OutChunk, OutFrame

__all__ = ["GOP_CACHE_FRAMES", "Audience", "FrameFeed", "Member"]

GOP_CACHE_FRAMES = 24  # an fMP4 joiner may start at most this far (1.5 s at 16 fps) behind the newest frame


class Member:
    """One spectator's output: its access, its own replies, its bounded share of the packed stream."""

    def __init__(self, access: Access, media: str, *, max_frames: int = 30, max_messages: int = 256) -> None:
        self.access = access
        self.media = media
        self.connection = Connection(media)
        self.control: deque[Any] = deque()  # its own messages (pong, errors), not shared
        self.queue: deque[Packed] = deque()  # shared packed messages, in order
        self.queued_frames = 0
        self.max_frames = max_frames
        self.max_messages = max_messages
        self.started = False  # has had a place to start (raw: a frame; fmp4: a key fragment)
        self.need_key = True
        self.frames_sent = 0
        self.frames_skipped = 0
        self.bytes_sent = 0
        self.joined_at = time.monotonic()
        self.join_idx = 0  # frames the session had sent when it joined (a raw member starts at the one before)
        self.first_frame_at: float | None = None
        self.end_reason: str | None = None
        self.event = asyncio.Event()
        self.on_end: Callable[[], None] | None = None  # a WebRTC peer closes itself when its member ends

    @property
    def grant_id(self) -> str | None:
        return self.access.grant_id

    @property
    def closed(self) -> bool:
        return self.connection.closed

    def offer(self, item: Packed) -> tuple[bool, int]:
        """Queue one shared message; (wants a key frame, frames skipped now)."""
        if self.connection.state != self.connection.state.OPEN:
            return False, 0
        if item.frames == 0:
            if len(self.queue) - self.queued_frames >= self.max_messages:  # never read: it is ended
                self.end("stalled")
                return False, 0
            self.queue.append(item)
            self.event.set()
            return False, 0
        if self.need_key and not item.key:  # it keeps asking (the packer throttles) until one comes
            skipped = item.frames if self.started else 0
            self.frames_skipped += skipped
            return True, skipped
        skipped = 0
        if self.queued_frames + item.frames > self.max_frames:  # it lags: drop its queued media
            skipped = self.queued_frames
            self.queue = deque(q for q in self.queue if q.frames == 0)
            self.queued_frames = 0
            if not item.key:
                self.need_key = True
                self.frames_skipped += skipped + item.frames
                return True, skipped + item.frames
            self.frames_skipped += skipped
        self.need_key = False
        self.started = True
        self.queue.append(item)
        self.queued_frames += item.frames
        self.event.set()
        return False, skipped

    def push_control(self, message: Any) -> int:
        self.control.append(message)
        self.event.set()
        return len(self.control)

    def reply(self, message: Any, max_pending: int) -> bool:
        """Its own reply (pong, error, presence), bounded like any connection's: past `max_pending`
        unread replies it is ended as abusive (a fatal rate_limited) and this answers False."""
        if self.push_control(message) <= max_pending:
            return True
        self.control.clear()
        self.end("abusive", Error(code=ErrorCode.RATE_LIMITED.value, fatal=True,
                                  message="too many requests waiting for replies; read your socket"))
        return False

    def push_presence(self, message: Presence) -> None:
        """`presence` is latest-wins: one not yet sent is replaced, so a burst of joins queues one."""
        if self.connection.state != self.connection.state.OPEN:
            return
        self.control = deque(m for m in self.control if not isinstance(m, Presence))
        self.push_control(message)

    def take(self) -> Packed | Any | None:
        if self.control:
            return self.control.popleft()
        if self.queue:
            item = self.queue.popleft()
            self.queued_frames -= item.frames
            return item
        return None

    async def next(self) -> Packed | Any | None:
        """Its next message (its own replies first), or None once it is closed or has ended."""
        while True:
            if self.connection.closed:
                return None
            item = self.take()
            if item is not None:
                return item
            if self.connection.ending:
                return None
            self.event.clear()
            await self.event.wait()

    def sent(self, item: Packed) -> None:
        if item.frames:
            self.frames_sent += item.frames
            if self.first_frame_at is None:
                self.first_frame_at = time.monotonic()
        self.bytes_sent += len(item.data)

    def end(self, reason: str, last: Any = None) -> None:
        """Its queued media is dropped; `last` (a fatal error, `moved`), if any, goes out, then it ends."""
        if self.connection.closed:
            return
        if self.end_reason is None:
            self.end_reason = reason
        self.queue = deque(q for q in self.queue if q.frames == 0)
        self.queued_frames = 0
        if last is not None:
            self.control.append(last)
        self.connection.end()
        self.event.set()
        if self.on_end is not None:
            self.on_end()

    def close(self) -> None:
        self.connection.close()
        self.event.set()


class Audience:
    """The session's spectators and the shared packers that feed them (one per media mode)."""

    def __init__(self, session_id: str, metrics: Any) -> None:
        self.session_id = session_id
        self.metrics = metrics
        self.members: list[Member] = []
        self.packers: dict[str, SharedPacker] = {}
        self.rtc: FrameFeed | None = None  # WebRTC spectators' shared stream reads the frames here
        # a raw joiner starts at once with the newest frame the owner got (fMP4 and WebRTC joiners
        # need a key frame, which the next frame brings): that frame, and its packing once packed
        self.last_frame: OutFrame | None = None
        self._last_raw: Packed | None = None
        # an fMP4 joiner starts at once at the newest key fragment and everything packed since
        # (while that spans at most GOP_CACHE_FRAMES frames; past it, it asks for a key fragment)
        self._gop: list[Packed] = []
        self._gop_frames = 0

    def __len__(self) -> int:
        """Spectators (viewer tokens); co-players ride on the same fan-out but are not counted here."""
        return sum(1 for m in self.members if m.access.role == Role.VIEWER)

    def players(self) -> int:
        """Co-players' connections (sessiond.session.players)."""
        return sum(1 for m in self.members if m.access.role == Role.PLAYER)

    def counts(self) -> dict[str, int]:
        """Connected members by grant id (the owner's list of share links shows them)."""
        out: dict[str, int] = {}
        for m in self.members:
            if m.grant_id is not None:
                out[m.grant_id] = out.get(m.grant_id, 0) + 1
        return out

    # ---- members -----------------------------------------------------------------------------
    def join(self, member: Member, packer: SharedPacker) -> None:
        """A member of `packer`'s media mode; the first of its mode starts the packer. A member starts
        at once where it can, with frames the owner already got (the same idx and pts), not only at
        the next frame (where the engine delivers a chunk's frames together, the next can be a chunk
        away): the first of its mode with the newest frame, packed anew; a later raw one with the
        newest packed frame; a later fmp4 one at the newest key fragment while it is recent."""
        fresh = member.media not in self.packers
        shared = self.packers.setdefault(member.media, packer)
        shared.start()
        self.members.append(member)
        if member.access.role == Role.VIEWER:
            self.metrics.spectators.inc()
        if fresh and self.last_frame is not None:
            # packed ahead of anything newer for every joiner of this mode (fmp4: a new encoder's
            # first fragment is a key fragment), so the first of them sees a picture now
            shared.frame(self.last_frame)
        elif member.media == "raw" and self._last_raw is not None:
            member.offer(self._last_raw)
        elif member.media == "fmp4" and self._gop:
            for item in self._gop:  # the newest key fragment on: it plays now, from the same idx and pts
                member.offer(item)
            return
        shared.request_keyframe()  # fmp4: it starts at a key fragment, soon
        log_event("spectator_joined", self.session_id, grant_id=member.grant_id, media=member.media,
                  spectators=len(self.members))

    def join_rtc(self, member: Member, max_frames: int) -> FrameFeed:
        """A WebRTC spectator: one more viewer of the session's shared spectator stream, which
        reads this feed (made for the first of them)."""
        if self.rtc is None or self.rtc.ended:
            self.rtc = FrameFeed(self, max_frames)
            if self.last_frame is not None:  # a new encoder's first frame is a key frame: the newest, now
                self.rtc.push(self.last_frame)
        self.members.append(member)
        if member.access.role == Role.VIEWER:  # a co-player (sessiond.session.players) is no spectator
            self.metrics.spectators.inc()
        log_event("spectator_joined", self.session_id, grant_id=member.grant_id, media=member.media,
                  spectators=len(self.members))
        return self.rtc

    def leave(self, member: Member) -> None:
        if member not in self.members:
            return
        self.members.remove(member)
        member.close()
        if member.access.role == Role.VIEWER:
            self.metrics.spectators.dec()
        if member.end_reason is not None and member.end_reason != "left":
            self.metrics.spectators_dropped.labels(reason=member.end_reason).inc()
        log_event("spectator_left", self.session_id, grant_id=member.grant_id, media=member.media,
                  reason=member.end_reason or "left", frames=member.frames_sent, skipped=member.frames_skipped,
                  spectators=len(self.members))
        if not any(m.media == member.media for m in self.members):
            if member.media == "raw":
                self._last_raw = None  # that packing's; a packer started again packs the newest frame anew
            if member.media == "fmp4":
                self._gop, self._gop_frames = [], 0  # that encoder's: a new one starts at its own key frame
            shared = self.packers.pop(member.media, None)
            if shared is not None:
                shared.stop()
            if member.media == "webrtc" and self.rtc is not None:
                self.rtc.end()
                self.rtc = None

    def _keep_gop(self, item: Packed) -> None:
        """The fMP4 stream from its newest key fragment (messages between included, in order)."""
        if item.frames and item.key:
            self._gop, self._gop_frames = [item], item.frames
        elif self._gop:
            self._gop.append(item)
            self._gop_frames += item.frames
            if self._gop_frames > GOP_CACHE_FRAMES:  # too far back to start a joiner at
                self._gop, self._gop_frames = [], 0

    def packer(self, media: str) -> SharedPacker | None:
        return self.packers.get(media)

    def deliver_to(self, media: str) -> Callable[[Packed], None]:
        """What the shared packer of `media` calls with each packed message."""
        def deliver(item: Packed) -> None:
            if media == "raw" and item.frames:
                self._last_raw = item
            elif media == "fmp4":
                self._keep_gop(item)
            want_key = False
            for m in self.members:
                if m.media != media:
                    continue
                wants, skipped = m.offer(item)
                want_key = want_key or wants
                if skipped:
                    self.metrics.spectator_frames_skipped.inc(skipped)
            if want_key:
                shared = self.packers.get(media)
                if shared is not None:
                    shared.request_keyframe()
        return deliver

    # ---- what the session feeds in -----------------------------------------------------------
    def frame(self, frame: OutFrame) -> None:
        self.last_frame = frame
        for shared in self.packers.values():
            shared.frame(frame)
        if self.rtc is not None:
            self.rtc.push(frame)

    def message(self, message: Any) -> None:
        for shared in self.packers.values():
            shared.message(message)
        if self.rtc is not None:
            self.rtc.push(message)

    def revoke(self, grant_id: str) -> int:
        """Members connected with a revoked grant end at once (a fatal unauthorized)."""
        n = 0
        for m in self.members:
            if m.grant_id == grant_id and not m.closed:
                m.end("revoked", Error(code=ErrorCode.UNAUTHORIZED.value, fatal=True,
                                       message=f"this {m.access.role.value} link was revoked by the session's owner"))
                n += 1
        return n

    def end_all(self, reason: str, last: Any = None) -> None:
        """Every member ends (the session closed, failed or moved: `last` tells them)."""
        if self.rtc is not None:  # WebRTC spectators' stream ends; each peer hears `last` from its member
            self.rtc.end()
        for m in self.members:
            m.end(reason, last)


class FrameFeed:
    """The frames and messages of the WebRTC spectators' shared stream (a `transports` SessionPort
    that `transports.webrtc.stream.SessionStream` reads: one encode for all of them). Bounded: past
    `max_frames` waiting (the encoder lags), the oldest go (counted as skipped) and the stream's
    viewers recover at the next key frame (they ask with PLI)."""

    def __init__(self, audience: Audience, max_frames: int) -> None:
        self._audience = audience
        self.session_id = audience.session_id
        self.width = self.height = self.fps = 0  # set by the session that makes it
        self.max_frames = max_frames
        self.items: deque[Any] = deque()
        self.frames = 0
        self.ended = False
        self.event = asyncio.Event()

    def generation(self) -> int:
        return 0  # every frame here was sent to the owner: none is stale

    def push(self, item: Any) -> None:
        if self.ended:
            return
        self.items.append(item)
        if isinstance(item, OutFrame):
            self.frames += 1
            while self.frames > self.max_frames:
                old = next(i for i in self.items if isinstance(i, OutFrame))
                self.items.remove(old)
                self.frames -= 1
                self._audience.metrics.spectator_frames_skipped.inc()
        self.event.set()

    def end(self) -> None:
        self.ended = True
        self.event.set()

    def submit(self, message: Any) -> None:
        return None  # each peer's own messages go to its own port

    async def next_output(self) -> OutChunk | Any | None:
        while True:
            if self.items:
                if not isinstance(self.items[0], OutFrame):
                    return self.items.popleft()
                frames = []
                while self.items and isinstance(self.items[0], OutFrame):
                    frames.append(self.items.popleft())
                self.frames -= len(frames)
                return OutChunk(frames=tuple(frames))
            if self.ended:
                return None
            self.event.clear()
            await self.event.wait()

    def mark_sent(self, frame: OutFrame) -> None:
        viewers = sum(1 for m in self._audience.members if m.media == "webrtc")
        if viewers:
            self._audience.metrics.spectator_frames_sent.inc(viewers)

    def close(self) -> None:
        self.end()
