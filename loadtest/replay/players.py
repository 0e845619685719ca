"""Co-play in a replay (docs/traces.md, "Co-play"): a trace session created with `players` N gets
N-1 invites (`POST /v1/sessions/{sid}/players`, the owner's token) and one connection per invited
player, each sending its own seat's `action` events, as N people at N browsers would. Each seat
(the owner's too) keeps its own figures for the report's per-player rows: actions sent, the newest
of its actions a frame applied (the frame's `players[k]`, which is also that player's own
`action_seq`), and its action-to-photon latencies."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import httpx

from loadtest.replay.percentiles import summarize
from protocols._client_support import error_from_response
from protocols.client import ClientError, SessionClient
from protocols.http import CreateSessionResponse
from protocols.messages import Frame, FramesInfo, Media

__all__ = ["CoPlayer", "PlayerMeter", "applied_by"]

logger = logging.getLogger(__name__)


def applied_by(msg: Frame | Media | FramesInfo, player: int) -> int:
    """The newest action of `player` the frames applied: their `players[player]` in a co-play
    session, else (a server that sends no `players`) the `action_seq` this connection received."""
    if msg.players is not None and player < len(msg.players):
        return int(msg.players[player])
    return int(msg.action_seq)


@dataclass
class PlayerMeter:
    """One seat's figures: what it sent and what the frames it received say was applied."""

    player: int
    actions_sent: int = 0
    last_seq_sent: int = -1
    applied_seq: int = -1  # the newest of this seat's actions any received frame applied
    frames_received: int = 0
    action_to_photon_ms: list[float] = field(default_factory=list)
    dropped: int = 0  # actions left unapplied when the seat went away (a detach or a pause): not timed
    _pending: deque[tuple[int, float]] = field(default_factory=deque)  # (seq, sent at) not yet applied

    def sent(self, seq: int, t: float) -> None:
        self.actions_sent += 1
        self.last_seq_sent = seq
        self._pending.append((seq, t))

    def frames(self, applied: int, n: int, t: float) -> None:
        """`n` frames arrived at `t` (monotonic) having applied this seat's action `applied`."""
        self.frames_received += n
        self.applied_seq = max(self.applied_seq, applied)
        while self._pending and self._pending[0][0] <= applied:
            self.action_to_photon_ms.append((t - self._pending.popleft()[1]) * 1000.0)

    def away(self) -> None:
        """The seat sees no frame for a while (its connection detached, or paused): the actions still
        waiting are not timed over the absence, they count as unresolved."""
        self.dropped += len(self._pending)
        self._pending.clear()

    def to_json(self) -> dict[str, Any]:
        return {"player": self.player, "actions_sent": self.actions_sent, "last_seq_sent": self.last_seq_sent,
                "applied_seq": self.applied_seq, "frames_received": self.frames_received,
                "action_to_photon_ms": summarize(self.action_to_photon_ms), "actions_unresolved": self.dropped + len(self._pending)}


class CoPlayer:
    """One invited player of a replayed session: its invite, its connection and its reader."""

    def __init__(self, player: int, *, timeout_s: float, name: str) -> None:
        self.meter = PlayerMeter(player)
        self._http = httpx.AsyncClient(timeout=timeout_s)
        self.client = SessionClient(http=self._http, timeout_s=timeout_s, auto_received=True, name=name)
        self.errors: dict[str, int] = {}
        self._reader: asyncio.Task[None] | None = None
        self._media = "raw"

    async def join(self, url: str, session: CreateSessionResponse, media: str) -> None:
        """Invite this player with the owner's token (`session`'s) and connect with the invite's."""
        base = url.rstrip("/")
        try:
            response = await self._http.post(f"{base}/v1/sessions/{session.session_id}/players", json={},
                                             headers={"authorization": f"Bearer {session.token}"})
        except httpx.HTTPError as exc:
            raise ClientError("disconnected", f"inviting player {self.meter.player} failed: {exc!r}") from None
        if response.status_code != 201:
            raise error_from_response(response.status_code, response.content, response.headers)
        invite = response.json()
        if invite.get("player") != self.meter.player:
            raise ClientError("conflict", f"the invite took seat {invite.get('player')}, the trace's player is "
                              f"{self.meter.player} (invites take the lowest free seat: replay them in order)")
        self.client.attach(url, dataclasses.replace(session, token=invite["token"], ws_url=invite["ws_url"],
                                                    webrtc_url=invite["webrtc_url"]))
        self._media = media
        await self.connect()

    async def connect(self) -> None:
        welcome = await self.client.connect(self._media)
        if welcome.session.get("player") != self.meter.player:
            raise ClientError("conflict", f"connected as seat {welcome.session.get('player')}, expected "
                              f"{self.meter.player}")
        self._reader = asyncio.create_task(self._read(), name=f"replay-player-{self.meter.player}")

    async def disconnect(self) -> None:
        reader, self._reader = self._reader, None
        await self.client.disconnect()
        if reader is not None:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def act(self, fields: dict[str, Any], t: float) -> None:
        mouse = fields.get("mouse")
        action = await self.client.send_action(fields["keys"], tuple(mouse) if mouse else None, fields.get("buttons"),
                                               fields.get("axes"))
        self.meter.sent(action.seq, t)

    async def close(self) -> None:
        try:
            await self.disconnect()
        finally:
            await self.client.aclose()
            await self._http.aclose()

    async def _read(self) -> None:
        try:
            async for msg in self.client.messages():
                if isinstance(msg, Frame):
                    self.meter.frames(applied_by(msg, self.meter.player), 1, time.monotonic())
                elif isinstance(msg, Media | FramesInfo):
                    self.meter.frames(applied_by(msg, self.meter.player), msg.n, time.monotonic())
        except ClientError as err:
            logger.info("player %d: connection ended: %s", self.meter.player, err)
            self.errors[err.code] = self.errors.get(err.code, 0) + 1
