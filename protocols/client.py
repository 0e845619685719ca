"""A small asyncio client of the session protocol, shared by the replayer, the tests and users.

    async with SessionClient() as client:
        await client.create("http://127.0.0.1:8000", "director")
        await client.connect(media="raw")
        await client.direct("a lighthouse at dusk", seconds=5.0)
        async for msg in client.messages():
            ...  # Frame, SegmentStart, SegmentEnd, Ack, Error, Stats ...

Replies are matched to requests by id (`request`); every server message, replies included,
is also yielded by `messages()` in arrival order. A session that moves to another server (its
server drains: `moved`) is followed: `messages()` yields the `moved`, connects to the new URL with
the same media and goes on. After any other close, `reconnect()` asks the URL the session was
created on where it is now and connects there. At most `queue_size` messages wait to be
taken from `messages()`; beyond that the client stops reading the socket (TCP pushes back on
the server) and replies wait too, so a caller that sends requests must also consume messages.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any

import httpx

from ._client_support import ClientError, error_from_response, parse_body, ws_url_for
from ._connection import Connection
from .errors import ErrorCode
from .http import CreateSessionRequest, CreateSessionResponse, SessionStatus
from .messages import (
    PROTOCOL_VERSION,
    Action,
    Direct,
    Flush,
    Frame,
    FramesInfo,
    Hello,
    Interrupt,
    Media,
    Message,
    Moved,
    Pause,
    Ping,
    Received,
    Resume,
    SegmentStart,
    ServerMessage,
    Welcome,
)

__all__ = ["CLIENT_KEEPALIVE_S", "ClientError", "SessionClient"]

_FRAME_OVERHEAD = 4096  # bytes of a raw frame message beyond its pixels
_FMP4_MAX_SIZE = 64 * 1024 * 1024  # fmp4: the media size is not known in advance
CLIENT_KEEPALIVE_S = 2.0  # how long an idle HTTP connection is kept for reuse

# failures that mean "the session is on its way elsewhere; ask again shortly"
_RETRY_CODES = frozenset({ErrorCode.STORE_UNAVAILABLE.value, ErrorCode.CAPACITY.value, "disconnected"})


class SessionClient:
    """One session seen by one client: its HTTP calls and one WebSocket connection at a time."""

    def __init__(
        self,
        *,
        http: httpx.AsyncClient | None = None,
        timeout_s: float = 10.0,
        auto_received: bool = False,
        queue_size: int = 256,
        name: str = "protocols.client",
    ) -> None:
        # idle pooled connections are dropped after CLIENT_KEEPALIVE_S, before any server of ours
        # (30 s) or a default uvicorn (5 s) closes them: a request never goes out on a closing one
        self._http = http if http is not None else httpx.AsyncClient(
            timeout=timeout_s, limits=httpx.Limits(keepalive_expiry=CLIENT_KEEPALIVE_S))
        self._owns_http = http is None
        self.timeout_s = timeout_s
        self.auto_received = auto_received
        self.queue_size = queue_size
        self.name = name
        self.base_url: str | None = None
        self.session: CreateSessionResponse | None = None
        self._conn: Connection | None = None
        self._next_id = 1
        self._media = "raw"  # of the last connect(): a followed move reconnects with it
        self._play_at: dict[int, float] = {}  # segment -> when its playback may start (monotonic)
        self._next_seq = 0  # kept across reconnects: the session ignores old seqs
        self._last_ts = -math.inf
        self._clock = (time.time() * 1000.0, time.monotonic())

    @property
    def welcome(self) -> Welcome | None:
        return self._conn.welcome if self._conn is not None else None

    # ---- HTTP ---------------------------------------------------------------------------------

    async def create(
        self,
        base_url: str,
        mode: str,
        prompt: str | None = None,
        seed: int | None = None,
        *,
        model: str | None = None,
        width: int | None = None,
        height: int | None = None,
        fps: int | None = None,
        players: int | None = None,
    ) -> CreateSessionResponse:
        """`POST /v1/sessions`; a refusal raises ClientError (503: code capacity, retry_after_s).
        `players` (extension): co-play seats of a world session, the owner included."""
        body = CreateSessionRequest(mode, model, prompt, seed, width, height, fps, players).to_json()
        response = await self._call("POST", f"{base_url.rstrip('/')}/v1/sessions", 201, json=body)
        session = parse_body(CreateSessionResponse.from_json, response)
        self.attach(base_url, session)
        return session

    def attach(self, base_url: str, session: CreateSessionResponse) -> None:
        """Use a session created elsewhere (its create response carries the token)."""
        self.base_url = base_url.rstrip("/")
        self.session = session

    async def status(self) -> SessionStatus:
        response = await self._call("GET", self._session_url(), 200, headers=self._auth())
        return parse_body(SessionStatus.from_json, response)

    async def close_session(self) -> None:
        """`DELETE` the session: the server frees its state."""
        await self._call("DELETE", self._session_url(), 204, headers=self._auth())

    async def _call(self, method: str, url: str, expected: int, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise ClientError("disconnected", f"{method} {url} failed: {exc!r}") from None
        if response.status_code != expected:
            raise error_from_response(response.status_code, response.content, response.headers)
        return response

    # ---- WebSocket ----------------------------------------------------------------------------

    async def connect(
        self, media: str = "raw", token: str | None = None, *, max_size: int | None = None
    ) -> Welcome:
        """Open the session's WebSocket, say hello and return the server's welcome."""
        session = self._need_session()
        if media not in ("raw", "fmp4"):
            raise ClientError(
                ErrorCode.INVALID_FIELD, f"media must be 'raw' or 'fmp4', got {media!r}", field="media"
            )
        if self._conn is not None and not self._conn.closed:
            raise ClientError(ErrorCode.CONFLICT, "already connected; disconnect() first")
        self._media = media
        if max_size is None:
            max_size = (
                session.width * session.height * 3 + _FRAME_OVERHEAD if media == "raw" else _FMP4_MAX_SIZE
            )
        self._conn = await Connection.open(
            ws_url_for(self.base_url or "", session.ws_url, media),
            token or session.token,
            Hello(v=PROTOCOL_VERSION, client=self.name),
            max_size=max_size,
            queue_size=self.queue_size,
            timeout_s=self.timeout_s,
        )
        return self._conn.welcome

    async def messages(self) -> AsyncIterator[ServerMessage]:
        """Every server message of the current connection in arrival order; returns when it
        closes cleanly, raises the ClientError that closed it otherwise. With auto_received,
        each frame is acknowledged with `received` as it is handed out."""
        while True:
            conn = self._need_connection()
            moved: Moved | None = None
            try:
                async for msg in conn.messages():
                    if isinstance(msg, Moved):
                        moved = msg
                    if self.auto_received and isinstance(msg, Frame | Media | FramesInfo):
                        last = msg.idx + (msg.n - 1 if isinstance(msg, Media | FramesInfo) else 0)
                        await conn.send_if_open(Received(last))  # a closed connection: see received()
                    if isinstance(msg, SegmentStart):
                        self._play_at[msg.segment] = time.monotonic() + (msg.start_after_ms or 0) / 1000.0
                    yield msg
            except ClientError:
                if moved is None:
                    raise
            if moved is None:
                return
            await self._follow(moved.ws_url, moved.webrtc_url)

    async def _follow(self, ws_url: str, webrtc_url: str, within_s: float | None = None) -> Welcome:
        """Connect to the session at its new URLs (same media), retrying while it settles there."""
        self.session = dataclasses.replace(self._need_session(), ws_url=ws_url, webrtc_url=webrtc_url)
        await self.disconnect()
        deadline = time.monotonic() + (within_s if within_s is not None else self.timeout_s)
        while True:
            try:
                return await self.connect(self._media)
            except ClientError as exc:
                if exc.code not in _RETRY_CODES or time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(min(exc.retry_after_s or 0.25, max(0.0, deadline - time.monotonic())))

    async def reconnect(self, within_s: float = 30.0) -> Welcome:
        """After a connection closed: ask where the session is now (`GET /v1/sessions/{sid}` on the
        URL it was created on: through a fleet gateway the status names its current `ws_url`) and
        connect there with the same media. Waits while the session is being moved (503 with
        Retry-After), up to `within_s` seconds."""
        deadline = time.monotonic() + within_s
        session = self._need_session()
        while True:
            try:
                response = await self._call("GET", self._session_url(), 200, headers=self._auth())
                where = response.json()
                ws_url = where.get("ws_url", session.ws_url) if isinstance(where, dict) else session.ws_url
                webrtc_url = where.get("webrtc_url", session.webrtc_url) if isinstance(where, dict) else session.webrtc_url
                return await self._follow(str(ws_url), str(webrtc_url), max(0.0, deadline - time.monotonic()))
            except ClientError as exc:
                if exc.code not in _RETRY_CODES or time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(min(exc.retry_after_s or 0.25, max(0.0, deadline - time.monotonic())))

    def play_at(self, segment: int) -> float | None:
        """When (time.monotonic()) the segment's first frame may start playing without a stall,
        by the server's `segment_start.start_after_ms` advice counted from its arrival (at once
        when the server gave none); None before its `segment_start` arrived."""
        return self._play_at.get(segment)

    async def send(self, msg: Message) -> None:
        await self._need_connection().send(msg)

    async def request(self, msg: Message, *, timeout_s: float | None = None) -> ServerMessage:
        """Send a message with an `id` and return the server message whose `re` is that id; an
        `error` reply raises ClientError with its code."""
        request_id = getattr(msg, "id", None)
        if not isinstance(request_id, int):
            raise ClientError(ErrorCode.INVALID_FIELD, f"{msg.T} has no id to match a reply to", field="id")
        return await self._need_connection().request(msg, request_id, timeout_s or self.timeout_s)

    def now_ms(self) -> float:
        """The clock of `ts` fields: Unix ms when the client was made, advanced monotonically."""
        wall_ms, mono = self._clock
        return wall_ms + (time.monotonic() - mono) * 1000.0

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    # ---- the messages of docs/protocol.md ------------------------------------------------------------

    async def send_action(
        self,
        keys: Sequence[str],
        mouse: tuple[float, float] | None = None,
        buttons: int | None = None,
        axes: Sequence[float] | None = None,
    ) -> Action:
        """Send the controller's state; seq and ts strictly increase. Returns what was sent."""
        ts = max(self.now_ms(), self._last_ts + 0.001)
        action = Action(
            self._next_seq, ts, tuple(keys), mouse, buttons, None if axes is None else tuple(axes)
        )
        await self.send(action)
        self._next_seq, self._last_ts = self._next_seq + 1, ts
        return action

    async def direct(
        self, prompt: str, seconds: float | None = None, seed: int | None = None, cut: bool = False
    ) -> int:
        """Send a direction; returns its id (segment_start/segment_end carry it as `re`)."""
        request_id = self.next_id()
        await self.send(Direct(request_id, prompt, seconds, seed, cut))
        return request_id

    async def interrupt(self) -> ServerMessage:
        return await self.request(Interrupt(self.next_id()))

    async def flush(self) -> ServerMessage:
        return await self.request(Flush(self.next_id()))

    async def pause(self) -> ServerMessage:
        return await self.request(Pause(self.next_id()))

    async def resume(self) -> ServerMessage:
        return await self.request(Resume(self.next_id()))

    async def ping(self) -> ServerMessage:
        return await self.request(Ping(self.next_id(), self.now_ms()))

    async def received(self, idx: int) -> None:
        """Acknowledge frames up to `idx`. An acknowledgement that meets a connection already closed
        by the server is dropped: it acknowledges nothing there, and the close itself (a `moved`
        followed, or the error that ended it) comes through `messages()`. Frames, a `moved` and the
        close can all be on the wire before the first of those frames is acknowledged."""
        await self._need_connection().send_if_open(Received(idx))

    # ---- lifecycle ----------------------------------------------------------------------------------

    async def disconnect(self) -> None:
        """Close the WebSocket; the session lives on (connect() again to reattach)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def aclose(self) -> None:
        await self.disconnect()
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> SessionClient:
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.aclose()

    def _need_session(self) -> CreateSessionResponse:
        if self.session is None or self.base_url is None:
            raise ClientError(ErrorCode.NOT_FOUND, "no session: call create() or attach() first")
        return self.session

    def _need_connection(self) -> Connection:
        if self._conn is None:
            raise ClientError("disconnected", "not connected: call connect() first")
        return self._conn

    def _session_url(self) -> str:
        return f"{self.base_url}/v1/sessions/{self._need_session().session_id}"

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._need_session().token}"}
