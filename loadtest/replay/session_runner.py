"""One replayed user: sends a trace session's events through protocols.client.SessionClient and
feeds what it sends and receives into a SessionMeter. A co-play session (`players` at its create)
also invites its players and sends each one's events on its own connection (loadtest.replay.players)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from loadtest.replay.meter import SessionMeter
from loadtest.replay.players import CoPlayer, PlayerMeter, applied_by
from loadtest.replay.schedule import Step
from protocols.client import ClientError, SessionClient
from protocols.messages import (
    Ack,
    Direct,
    Error,
    Flush,
    Frame,
    FramesInfo,
    Interrupt,
    Media,
    Pause,
    Resume,
    SegmentEnd,
    SegmentStart,
)

__all__ = ["MEDIA_FOR_TRANSPORT", "SessionRunner"]

logger = logging.getLogger(__name__)

MEDIA_FOR_TRANSPORT = {"ws-raw": "raw", "ws-fmp4": "fmp4"}


class SessionRunner:
    """Owns its client and its reader task; ``run`` returns when the session's events are done."""

    def __init__(self, steps: list[Step], meter: SessionMeter, url: str, *, origin: float,
                 transport: str | None = None, segment_wait_s: float = 120.0, timeout_s: float = 30.0) -> None:
        self.steps = steps
        self.meter = meter
        self.url = url
        self.origin = origin
        self.transport_override = transport
        self.segment_wait_s = segment_wait_s
        self.client = SessionClient(timeout_s=timeout_s, auto_received=True, name="sessiond-replay")
        self.errors: dict[str, int] = {}
        self._reader: asyncio.Task[None] | None = None
        self._media = "raw"
        self._segment_open = asyncio.Event()  # set while no segment is pending
        self._segment_open.set()
        self._live = False  # admitted and not closed
        self.timeout_s = timeout_s
        self.owner_seat: PlayerMeter | None = None  # co-play: the owner's per-player figures
        self.players: dict[int, CoPlayer] = {}  # co-play: seat -> its connection

    async def run(self) -> None:
        try:
            for step in self.steps:
                await self._wait(step)
                if not await self._apply(step):
                    break
        finally:
            self.meter.result.events_skipped = len(self.steps) - self.meter.result.events_sent
            await self._shutdown()

    async def _wait(self, step: Step) -> None:
        if step.after_segment:
            try:
                await asyncio.wait_for(self._segment_open.wait(), self.segment_wait_s)
            except TimeoutError:
                logger.warning("session %s: segment did not end within %.0f s", self.meter.result.key,
                               self.segment_wait_s)
        delay = self.origin + step.at_s - time.monotonic() if step.at_s is not None else step.gap_s or 0.0
        if delay > 0:
            await asyncio.sleep(delay)

    async def _apply(self, step: Step) -> bool:
        """Send one event; False when the session cannot go on (rejected, failed)."""
        e, now = step.event, time.monotonic()
        try:
            if e.ev == "create":
                ok = await self._create(e.fields, now)
                if ok:
                    self.meter.result.events_sent += 1
                return ok
            await self._send(e.ev, e.fields, now)
        except ClientError as err:
            self.meter.ended(time.monotonic())
            self.meter.failed(f"{e.ev}: {err.code}: {err.message}", time.monotonic())
            self._live = False
            return False
        self.meter.result.events_sent += 1
        return e.ev != "close"

    async def _create(self, f: dict[str, Any], now: float) -> bool:
        transport = self.transport_override or f.get("transport", "ws-raw")
        media = MEDIA_FOR_TRANSPORT.get(transport)
        if media is None:
            self.meter.failed(f"transport {transport!r} is not replayable yet (use ws-raw or ws-fmp4)", now)
            return False
        self._media = media
        self.meter.create_sent(now)
        try:
            session = await self.client.create(self.url, f["mode"], f.get("prompt"), f.get("seed"),
                                               model=f.get("model"), players=f.get("players"))
        except ClientError as err:
            if err.code == "capacity":
                self.meter.rejected("capacity", err.retry_after_s, time.monotonic())
            else:
                self.meter.failed(f"create: {err.code}: {err.message}", time.monotonic())
            return False
        self._live = True
        self.meter.admitted(time.monotonic(), session.fps, session.session_id)
        await self._connect()
        seats = int(f.get("players", 1))
        if seats > 1:  # co-play: the owner's row, then each invited player's connection, seat by seat
            self.owner_seat = PlayerMeter(0)
            self.meter.result.players.append(self.owner_seat)
            for player in range(1, seats):
                joined = CoPlayer(player, timeout_s=self.timeout_s, name=f"sessiond-replay-p{player}")
                self.players[player] = joined
                self.meter.result.players.append(joined.meter)
                try:
                    await joined.join(self.url, session, self._media)
                except ClientError:  # the session fails on it (`_apply`): leave nothing behind on the server
                    await self._leave_players()
                    with contextlib.suppress(ClientError):
                        await self.client.close_session()
                    raise
        return True

    async def _connect(self) -> None:
        await self.client.connect(media=self._media)
        self.meter.connected(time.monotonic())
        self._reader = asyncio.create_task(self._read(), name=f"replay-reader-{self.meter.result.key}")

    async def _disconnect(self) -> None:
        reader, self._reader = self._reader, None
        await self.client.disconnect()
        if reader is not None:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        self.meter.disconnected(time.monotonic())
        if self.owner_seat is not None:
            self.owner_seat.away()

    async def _send(self, ev: str, f: dict[str, Any], now: float) -> None:
        c, m = self.client, self.meter
        player = int(f.get("player", 0))
        if player:
            await self._send_as(self.players[player], ev, f, now)
            return
        if ev == "action":
            mouse = f.get("mouse")
            action = await c.send_action(f["keys"], tuple(mouse) if mouse else None, f.get("buttons"), f.get("axes"))
            m.action_sent(action.seq, now)
            if self.owner_seat is not None:
                self.owner_seat.sent(action.seq, now)
        elif ev == "direct":
            rid = c.next_id()
            m.direct_sent(rid, f.get("seconds"), now)
            self._segment_open.clear()
            await c.send(Direct(rid, f["prompt"], f.get("seconds"), None, bool(f.get("cut", False))))
        elif ev == "interrupt":
            rid = c.next_id()
            m.interrupt_sent(rid, now)
            await c.send(Interrupt(rid))
        elif ev == "flush":
            rid = c.next_id()
            m.flush_sent(rid, now)
            await c.send(Flush(rid))
        elif ev == "pause":
            m.paused(now)
            if self.owner_seat is not None:
                self.owner_seat.away()
            await c.send(Pause(c.next_id()))
        elif ev == "resume":
            m.resumed(now)
            await c.send(Resume(c.next_id()))
        elif ev == "detach":
            await self._disconnect()
        elif ev == "attach":
            await self._connect()
        elif ev == "close":  # the co-players leave, then DELETE: the server ends the owner's connection with it
            self._live = False
            await self._leave_players()
            await c.close_session()
            await self._disconnect()
            m.ended(time.monotonic())

    async def _send_as(self, joined: CoPlayer, ev: str, f: dict[str, Any], now: float) -> None:
        """A co-player's event (docs/traces.md: `action`, `detach`, `attach`) on its own connection."""
        if ev == "action":
            await joined.act(f, now)
        elif ev == "detach":
            await joined.disconnect()
        elif ev == "attach":
            await joined.connect()

    async def _leave_players(self) -> None:
        players, self.players = list(self.players.values()), {}
        for joined in players:
            await joined.close()
            for code, n in joined.errors.items():
                key = f"player{joined.meter.player}:{code}"
                self.errors[key] = self.errors.get(key, 0) + n

    async def _read(self) -> None:
        m = self.meter
        try:
            async for msg in self.client.messages():
                t = time.monotonic()
                if isinstance(msg, Frame | Media | FramesInfo) and self.owner_seat is not None:
                    self.owner_seat.frames(applied_by(msg, 0), 1 if isinstance(msg, Frame) else msg.n, t)
                if isinstance(msg, Frame):
                    m.frame(msg.pts, msg.idx, msg.segment, msg.action_seq, msg.disc, t)
                elif isinstance(msg, Media):
                    m.media(msg.pts, msg.idx, msg.n, msg.segment, msg.action_seq, msg.disc, t)
                elif isinstance(msg, Ack):
                    m.ack(msg.re, msg.pts, t)
                elif isinstance(msg, SegmentStart):
                    m.segment_start(msg.segment, msg.re, t, msg.pts, self.client.play_at(msg.segment))
                elif isinstance(msg, SegmentEnd):
                    m.segment_end(msg.segment, msg.re, msg.status, t)
                    self._segment_open.set()
                elif isinstance(msg, Error):
                    self.errors[msg.code] = self.errors.get(msg.code, 0) + 1
        except ClientError as err:
            if self._live:
                logger.info("session %s: connection ended: %s", m.result.key, err)
                self.errors[err.code] = self.errors.get(err.code, 0) + 1

    async def _shutdown(self) -> None:
        """Leave nothing behind: a session the trace did not close is closed now."""
        try:
            await self._leave_players()
            if self._reader is not None:
                await self._disconnect()
            if self._live:
                self.meter.ended(time.monotonic())
                await self.client.close_session()
        except ClientError as err:
            logger.info("session %s: close at the end failed: %s", self.meter.result.key, err)
        finally:
            self._live = False
            await self.client.aclose()
