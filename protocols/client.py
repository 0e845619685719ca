"""A small asyncio client of the session protocol, shared by the replayer, the tests and users.

    client = SessionClient()
    session = await client.create("http://127.0.0.1:8000", "director")
    await client.connect(media="raw")
    client.direct("a lighthouse at dusk", seconds=5.0)
    async for msg in client.messages():
        ...  # Frame, SegmentStart, SegmentEnd, Ack, Error, Stats ...

Replies are matched to requests by id (`request`); every server message, replies included,
is also yielded by `messages()` in arrival order. Iterate `messages()`: at most `queue_size`
messages wait for the reader, after which the socket itself pushes back on the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Sequence
from types import TracebackType

import httpx
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from ._client_support import ClientError, error_from_close, error_from_response, ws_url_for
from .codec import decode, encode
from .errors import ErrorCode, ProtocolError
from .http import CreateSessionRequest, CreateSessionResponse, SessionStatus
from .messages import (
    PROTOCOL_VERSION,
    Action,
    Direct,
    Error,
    Flush,
    Frame,
    FramesInfo,
    Hello,
    Interrupt,
    Media,
    Message,
    Pause,
    Ping,
    Received,
    Resume,
    ServerMessage,
    Welcome,
)

__all__ = ["ClientError", "SessionClient"]

logger = logging.getLogger(__name__)

_FRAME_OVERHEAD = 4096  # bytes of a raw frame message beyond its pixels
_DEFAULT_MAX_SIZE = 64 * 1024 * 1024  # when the frame size is unknown


_Inbox = asyncio.Queue[ServerMessage | ClientError | None]


def _closed(exc: ConnectionClosed) -> ClientError:
    return error_from_close(exc.rcvd.code if exc.rcvd else None, exc.rcvd.reason if exc.rcvd else "")


class SessionClient:
    """One session seen by one client: HTTP calls plus one WebSocket connection at a time."""

    def __init__(
        self,
        *,
        http: httpx.AsyncClient | None = None,
        timeout_s: float = 10.0,
        auto_received: bool = False,
        queue_size: int = 256,
        name: str = "protocols.client",
    ) -> None:
        self._http = http if http is not None else httpx.AsyncClient(timeout=timeout_s)
        self._owns_http = http is None
        self.timeout_s = timeout_s
        self.auto_received = auto_received
        self.name = name
        self.base_url: str | None = None
        self.session: CreateSessionResponse | None = None
        self.welcome: Welcome | None = None
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self.queue_size = queue_size
        self._inbox: _Inbox = asyncio.Queue()
        self._room = asyncio.Semaphore(queue_size)
        self._pending: dict[int, asyncio.Future[ServerMessage]] = {}
        self._next_id = 1
        self._next_seq = 0  # kept across reconnects: the session ignores old seqs
        self._last_ts = -math.inf
        self._clock = (time.time() * 1000.0, time.monotonic())

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
    ) -> CreateSessionResponse:
        """`POST /v1/sessions`; a refusal raises ClientError (503: code capacity, retry_after_s)."""
        body = CreateSessionRequest(mode, model, prompt, seed, width, height, fps).to_json()
        response = await self._http.post(f"{base_url.rstrip('/')}/v1/sessions", json=body)
        if response.status_code != 201:
            raise error_from_response(response.status_code, response.content, response.headers)
        self.attach(base_url, CreateSessionResponse.from_json(response.json()))
        assert self.session is not None
        return self.session

    def attach(self, base_url: str, session: CreateSessionResponse) -> None:
        """Use a session created elsewhere (its create response carries the token)."""
        self.base_url = base_url.rstrip("/")
        self.session = session

    async def status(self) -> SessionStatus:
        response = await self._http.get(self._session_url(), headers=self._auth())
        if response.status_code != 200:
            raise error_from_response(response.status_code, response.content, response.headers)
        return SessionStatus.from_json(response.json())

    async def close_session(self) -> None:
        """`DELETE` the session: the server frees its state."""
        response = await self._http.delete(self._session_url(), headers=self._auth())
        if response.status_code != 204:
            raise error_from_response(response.status_code, response.content, response.headers)

    # ---- WebSocket ----------------------------------------------------------------------------

    async def connect(self, media: str = "raw", token: str | None = None, *, max_size: int | None = None) -> Welcome:
        """Open the session's WebSocket, say hello and return the server's welcome."""
        session = self._need_session()
        if media not in ("raw", "fmp4"):
            raise ClientError(ErrorCode.INVALID_FIELD, f"media must be 'raw' or 'fmp4', got {media!r}", field="media")
        if self._ws is not None:
            raise ClientError(ErrorCode.CONFLICT, "already connected; disconnect() first")
        if max_size is None:
            max_size = session.width * session.height * 3 + _FRAME_OVERHEAD if media == "raw" else _DEFAULT_MAX_SIZE
        url = ws_url_for(self.base_url or "", session.ws_url, media)
        headers = {"Authorization": f"Bearer {token or session.token}"}
        try:
            ws = await ws_connect(url, additional_headers=headers, compression=None, max_size=max_size, proxy=None,
                                  open_timeout=self.timeout_s)
        except InvalidStatus as exc:
            raise error_from_response(exc.response.status_code, exc.response.body, exc.response.headers) from None
        except OSError as exc:
            raise ClientError("disconnected", f"cannot connect to {url}: {exc}") from None
        try:
            with contextlib.suppress(ConnectionClosed):  # refused: the reason is read below
                await ws.send(encode(Hello(v=PROTOCOL_VERSION, client=self.name)))
            welcome = await asyncio.wait_for(self._first_message(ws, max_size), self.timeout_s)
        except BaseException:
            with contextlib.suppress(ConnectionClosed):
                await ws.close()
            raise
        self._ws, self.welcome = ws, welcome
        self._inbox, self._room = asyncio.Queue(), asyncio.Semaphore(self.queue_size)
        self._reader = asyncio.create_task(self._read(ws, max_size, self._inbox, self._room),
                                           name="session-client-reader")
        return welcome

    async def _first_message(self, ws: ClientConnection, max_size: int) -> Welcome:
        try:
            msg = decode(await ws.recv(decode=False), max_bytes=max_size, expect="server")
        except ConnectionClosed as exc:
            raise _closed(exc) from None
        except ProtocolError as err:
            raise ClientError(err.code, f"the server sent an invalid message: {err.message}", field=err.field) from None
        if isinstance(msg, Error):
            raise ClientError(msg.code, msg.message)
        if not isinstance(msg, Welcome):
            raise ClientError(ErrorCode.BAD_MESSAGE, f"expected welcome after hello, got {msg.T}")
        return msg

    async def _read(self, ws: ClientConnection, max_size: int, inbox: _Inbox, room: asyncio.Semaphore) -> None:
        """Decode every message of one connection, resolve replies, queue everything; the last
        item queued is None (clean close) or the ClientError that ended the connection."""
        end: ClientError | None = None
        try:
            async for data in ws:
                if isinstance(data, str):
                    raise ProtocolError(ErrorCode.BAD_MESSAGE, "the server sent a text frame")
                msg = decode(data, max_bytes=max_size, expect="server", max_prompt_chars=max_size)
                re = getattr(msg, "re", None)
                future = self._pending.pop(re, None) if re is not None else None
                if future is not None and not future.done():
                    future.set_result(msg)
                await room.acquire()
                inbox.put_nowait(msg)
        except ConnectionClosed as exc:
            end = _closed(exc)
        except ProtocolError as err:
            end = ClientError(err.code, f"the server sent an invalid message: {err.message}", field=err.field)
            await ws.close()
        finally:
            reason = end or ClientError("disconnected", "the connection is closed")
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(reason)
            self._pending.clear()
            inbox.put_nowait(end)

    async def messages(self) -> AsyncIterator[ServerMessage]:
        """Every server message of the current connection in arrival order; returns when it
        closes cleanly, raises the ClientError that closed it otherwise. With auto_received,
        each frame is acknowledged with `received` as it is handed out."""
        inbox, room = self._inbox, self._room
        while True:
            item = await inbox.get()
            if item is None:
                return
            if isinstance(item, ClientError):
                raise item
            room.release()
            if self.auto_received and self._ws is not None and isinstance(item, Frame | Media | FramesInfo):
                last = item.idx + (item.n - 1 if isinstance(item, Media | FramesInfo) else 0)
                await self.received(last)
            yield item

    async def send(self, msg: Message) -> None:
        if self._ws is None:
            raise ClientError("disconnected", "not connected; call connect() first")
        try:
            await self._ws.send(encode(msg))
        except ConnectionClosed as exc:
            raise _closed(exc) from None

    async def request(self, msg: Message, *, timeout_s: float | None = None) -> ServerMessage:
        """Send a message with an `id` and return the server message whose `re` is that id; an
        `error` reply raises ClientError with its code."""
        request_id = getattr(msg, "id", None)
        if not isinstance(request_id, int):
            raise ClientError(ErrorCode.INVALID_FIELD, f"{msg.T} has no id to match a reply to", field="id")
        future: asyncio.Future[ServerMessage] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self.send(msg)
            reply = await asyncio.wait_for(future, timeout_s or self.timeout_s)
        except TimeoutError:
            raise ClientError("timeout", f"no reply to {msg.T} id={request_id} in time") from None
        finally:
            self._pending.pop(request_id, None)
        if isinstance(reply, Error):
            raise ClientError(reply.code, reply.message)
        return reply

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    # ---- the messages of PROTOCOL.md ------------------------------------------------------------

    async def send_action(
        self,
        keys: Sequence[str],
        mouse: tuple[float, float] | None = None,
        buttons: int | None = None,
        axes: Sequence[float] | None = None,
    ) -> Action:
        """Send the controller's state; seq and ts (ms, monotonic) strictly increase."""
        wall_ms, mono = self._clock
        ts = max(wall_ms + (time.monotonic() - mono) * 1000.0, self._last_ts + 0.001)
        action = Action(self._next_seq, ts, tuple(keys), mouse, buttons, None if axes is None else tuple(axes))
        await self.send(action)
        self._next_seq, self._last_ts = self._next_seq + 1, ts
        return action

    async def direct(self, prompt: str, seconds: float | None = None, seed: int | None = None,
                     cut: bool = False) -> int:
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
        wall_ms, mono = self._clock
        return await self.request(Ping(self.next_id(), wall_ms + (time.monotonic() - mono) * 1000.0))

    async def received(self, idx: int) -> None:
        await self.send(Received(idx))

    # ---- lifecycle ----------------------------------------------------------------------------------

    async def disconnect(self) -> None:
        """Close the WebSocket; the session lives on (connect() again to reattach)."""
        ws, reader, self._ws, self._reader = self._ws, self._reader, None, None
        if ws is not None:
            with contextlib.suppress(ConnectionClosed):
                await ws.close()
        if reader is not None:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

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

    def _session_url(self) -> str:
        return f"{self.base_url}/v1/sessions/{self._need_session().session_id}"

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._need_session().token}"}
