"""One open WebSocket of a session, for client.py: a reader task decodes every server message,
resolves the request whose id it answers, and queues it for `messages()`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from ._client_support import ClientError, closed_error, error_from_response, invalid_from_server
from .codec import decode, encode
from .errors import ErrorCode, ProtocolError
from .messages import Error, Hello, Message, ServerMessage, Welcome

__all__ = ["Connection"]

_Inbox = asyncio.Queue[ServerMessage | ClientError | None]


class Connection:
    """Opened by `open`, which says hello and waits for the welcome; closed by `close`."""

    def __init__(self, ws: ClientConnection, welcome: Welcome, max_size: int, queue_size: int) -> None:
        self.welcome = welcome
        self._ws = ws
        self._max_size = max_size
        self._inbox: _Inbox = asyncio.Queue()
        self._room = asyncio.Semaphore(queue_size)
        self._pending: dict[int, asyncio.Future[ServerMessage]] = {}
        self._reader = asyncio.create_task(self._read(), name="session-client-reader")

    @classmethod
    async def open(
        cls, url: str, token: str, hello: Hello, *, max_size: int, queue_size: int, timeout_s: float
    ) -> Connection:
        headers = {"Authorization": f"Bearer {token}"}
        try:
            ws = await ws_connect(
                url,
                additional_headers=headers,
                compression=None,
                max_size=max_size,
                proxy=None,
                open_timeout=timeout_s,
            )
        except InvalidStatus as exc:
            raise error_from_response(
                exc.response.status_code, exc.response.body, exc.response.headers
            ) from None
        except (OSError, TimeoutError) as exc:
            raise ClientError("disconnected", f"cannot connect to {url}: {exc!r}") from None
        try:
            with contextlib.suppress(ConnectionClosed):  # refused: the reason is read below
                await ws.send(encode(hello))
            welcome = await asyncio.wait_for(_welcome(ws, max_size), timeout_s)
        except TimeoutError:
            await ws.close()
            raise ClientError("timeout", f"no welcome within {timeout_s} s of hello") from None
        except BaseException:
            with contextlib.suppress(ConnectionClosed):
                await ws.close()
            raise
        return cls(ws, welcome, max_size, queue_size)

    @property
    def closed(self) -> bool:
        return self._reader.done()

    async def send(self, msg: Message) -> None:
        try:
            await self._ws.send(encode(msg))
        except ConnectionClosed as exc:
            raise closed_error(exc) from None

    async def send_if_open(self, msg: Message) -> bool:
        """Send unless the connection has closed; False when it had (nothing is raised)."""
        if self.closed:
            return False
        try:
            await self._ws.send(encode(msg))
        except ConnectionClosed:
            return False
        return True

    async def request(self, msg: Message, request_id: int, timeout_s: float) -> ServerMessage:
        if self.closed:
            raise ClientError("disconnected", "the connection is closed; connect() again")
        future: asyncio.Future[ServerMessage] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self.send(msg)
            reply = await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            raise ClientError(
                "timeout", f"no reply to {msg.T} id={request_id} within {timeout_s} s"
            ) from None
        finally:
            self._pending.pop(request_id, None)
        if isinstance(reply, Error):
            raise ClientError(reply.code, reply.message)
        return reply

    async def messages(self) -> AsyncIterator[ServerMessage]:
        while True:
            item = await self._inbox.get()
            if item is None:
                return
            if isinstance(item, ClientError):
                raise item
            self._room.release()
            yield item

    async def close(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self._ws.close()
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)

    async def _read(self) -> None:
        """The last item queued is None (a clean close) or the ClientError that ended it."""
        end: ClientError | None = None
        try:
            async for data in self._ws:
                if isinstance(data, str):
                    raise ProtocolError(ErrorCode.BAD_MESSAGE, "the server sent a text frame")
                msg = decode(data, max_bytes=self._max_size, expect="server")
                re = getattr(msg, "re", None)
                future = self._pending.pop(re, None) if re is not None else None
                if future is not None and not future.done():
                    future.set_result(msg)
                await self._room.acquire()
                self._inbox.put_nowait(msg)
        except ConnectionClosed as exc:
            end = closed_error(exc)
        except ProtocolError as err:
            end = invalid_from_server(err)
            await self._ws.close()
        finally:
            reason = end or ClientError("disconnected", "the connection is closed")
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(reason)
            self._pending.clear()
            self._inbox.put_nowait(end)


async def _welcome(ws: ClientConnection, max_size: int) -> Welcome:
    try:
        msg = decode(await ws.recv(decode=False), max_bytes=max_size, expect="server")
    except ConnectionClosed as exc:
        raise closed_error(exc) from None
    except ProtocolError as err:
        raise invalid_from_server(err) from None
    if isinstance(msg, Error):
        raise ClientError(msg.code, msg.message)
    if not isinstance(msg, Welcome):
        raise ClientError(ErrorCode.BAD_MESSAGE, f"expected welcome after hello, got {msg.T}")
    return msg
