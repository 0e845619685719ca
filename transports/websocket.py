"""The WebSocket connection handler: one client connection attached to one session.

hello -> welcome, then two tasks: the reader reads every client message with the one inbound
reader of all transports (`transports.inbound.InboundReader`: limits, rate, abuse, metrics) and
submits it to the session (a bad message gets a coded `error` and is dropped; only
`unsupported_version`, a missing hello and repeated abuse end the connection);
the writer pulls the session's output in order, packs media in an executor, drops any frame of
an old generation right before the wire, and reports each frame it hands to the socket with
`mark_sent` (with no await between the generation check and the report, so an interrupt's
ack never misses a frame that goes out)."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Protocol

from protocols.codec import encode
from protocols.errors import ErrorCode
from protocols.messages import PROTOCOL_VERSION, Error, Frame, Limits, Media, Welcome
from transports.inbound import InboundLimits, InboundReader
from transports.interface import MediaPacker, OutChunk, OutFrame, SessionPort

__all__ = ["CLOSE_ABUSE", "CLOSE_NORMAL", "CLOSE_UNSUPPORTED", "HelloGate", "WebSocketConnection", "WireSocket"]

logger = logging.getLogger(__name__)

CLOSE_NORMAL = 1000
CLOSE_ABUSE = 1008  # policy violation: repeated bad input, or a fatal error was sent
CLOSE_UNSUPPORTED = 4400


class WireSocket(Protocol):
    """The few socket operations the handler needs (the daemon adapts its framework's socket)."""

    async def receive(self) -> bytes | str | None:
        """The next message (bytes, or str for a text frame); None once the peer has gone."""
        ...

    async def send(self, data: bytes) -> None: ...

    async def close(self, code: int, reason: str = "") -> None: ...


@dataclass(frozen=True)
class ConnectionOptions:
    limits: Limits  # announced in welcome
    hello_timeout_s: float = 10.0
    # message size, prompt length, request rate and abuse: the same for every transport
    inbound: InboundLimits = field(default_factory=InboundLimits)


class _Abusive(Exception):
    pass


class HelloGate(abc.ABC):
    """What every WebSocket connection of the protocol does the same way: wait for `hello` (coded
    errors for anything before it, a fatal one when it does not come in time), answer the reader's
    errors, end with a fatal one, and run its reader and writer until either stops. Subclasses hold
    `ws`, `_reader`, `_hello_timeout_s` and send with `_send` / close with `_close`."""

    ws: WireSocket
    _reader: InboundReader
    _hello_timeout_s: float

    @abc.abstractmethod
    async def _send(self, data: bytes) -> None: ...

    @abc.abstractmethod
    async def _close(self, code: int) -> None: ...

    @staticmethod
    async def _until_one_stops(reader: asyncio.Task[Any], writer: asyncio.Task[Any]) -> set[asyncio.Task[Any]]:
        """The tasks that stopped first; the other is cancelled and awaited."""
        done, pending = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return done

    async def _handshake(self) -> bool:
        deadline = time.monotonic() + self._hello_timeout_s
        while True:
            try:
                data = await asyncio.wait_for(self.ws.receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                await self._fatal(self._reader.fatal(ErrorCode.INVALID_FIELD, "no hello received in time; send "
                                                     "hello first"))
                return False
            if data is None:
                return False
            verdict = self._reader.read(data)
            if verdict.hello is not None:
                return True
            if verdict.error is not None and not await self._answer(verdict.error):
                return False

    async def _answer(self, error: Error) -> bool:
        """Send the reader's error; False (the connection is closed after a fatal one) when it ends here."""
        if error.fatal:
            close_code = CLOSE_UNSUPPORTED if error.code == ErrorCode.UNSUPPORTED_VERSION.value else CLOSE_ABUSE
            await self._fatal(error, close_code)
            return False
        await self._send(encode(error))
        return True

    async def _fatal(self, error: Error, close_code: int = CLOSE_ABUSE) -> None:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError, TimeoutError):
            await self._send(encode(error))
        await self._close(close_code)


class WebSocketConnection(HelloGate):
    def __init__(self, ws: WireSocket, attach: Callable[[], SessionPort], packer: MediaPacker,
                 welcome_session: dict[str, Any], options: ConnectionOptions, *, executor: Executor | None = None,
                 on_error: Callable[[str], None] | None = None) -> None:
        """`attach` is called once the client's hello is accepted: it attaches this connection
        to the session (taking over from any previous one) and returns the port."""
        self.ws = ws
        self._attach = attach
        self._port: SessionPort | None = None
        self.packer = packer
        self.welcome_session = welcome_session
        self.options = options
        self.executor = executor
        self._send_lock = asyncio.Lock()
        self._reader = InboundReader(options.inbound, hello_required=True, on_error=on_error)
        self._hello_timeout_s = options.hello_timeout_s
        self.frames_sent = 0
        self.frames_dropped = 0

    @property
    def port(self) -> SessionPort:
        if self._port is None:
            raise RuntimeError("the connection is not attached to its session before hello")
        return self._port

    async def run(self) -> None:
        """Serve the connection until either side ends it; always detaches from the session."""
        try:
            if not await self._handshake():
                return
            self._port = self._attach()
            await self._send(encode(Welcome(v=PROTOCOL_VERSION, session=self.welcome_session,
                                            limits=self.options.limits)))
            reader = asyncio.create_task(self._read_loop(), name=f"ws-read-{self.port.session_id}")
            writer = asyncio.create_task(self._write_loop(), name=f"ws-write-{self.port.session_id}")
            done = await self._until_one_stops(reader, writer)
            code = CLOSE_NORMAL
            for task in done:
                exc = task.exception()
                if isinstance(exc, _Abusive):
                    code = CLOSE_ABUSE
                elif exc is not None and not isinstance(exc, ConnectionError | OSError):
                    logger.error("connection of session %s failed: %r", self.port.session_id, exc)
            if writer in done and writer.exception() is None and writer.result() is True:
                code = CLOSE_ABUSE
            await self._close(code)
        finally:
            if self._port is not None:
                self._port.close()

    # ---- reading -----------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        while True:
            data = await self.ws.receive()
            if data is None:
                return
            verdict = self._reader.read(data)
            if verdict.error is not None:
                if not await self._answer(verdict.error):
                    raise _Abusive
            elif verdict.message is not None:
                self.port.submit(verdict.message)

    # ---- writing -----------------------------------------------------------------------------
    async def _write_loop(self) -> bool:
        """Returns True when it stopped after a fatal error from the session."""
        loop = asyncio.get_running_loop()
        for msg in self.packer.start():
            await self._send(encode(msg))
        fatal = False
        while True:
            item = await self.port.next_output()
            if item is None:
                return fatal
            if isinstance(item, OutChunk):
                if item.frames and item.frames[0].generation != self.port.generation():
                    self.frames_dropped += len(item.frames)
                    continue
                packed = await loop.run_in_executor(self.executor, _pack_encode, self.packer, item)
                await self._send_packed(item, packed)
            else:
                fatal = fatal or (isinstance(item, Error) and item.fatal)
                await self._send(encode(item))

    async def _send_packed(self, chunk: OutChunk, packed: list[tuple[Any, bytes]]) -> None:
        by_idx = {f.idx: f for f in chunk.frames}
        for msg, data in packed:
            frames = _frames_of(msg, by_idx)
            if any(f.generation != self.port.generation() for f in frames):
                self.frames_dropped += sum(1 for _ in frames)
                return  # the rest of the chunk is of the old generation too
            for f in frames:
                self.port.mark_sent(f)
            self.frames_sent += len(frames)
            await self._send(data)

    async def _send(self, data: bytes) -> None:
        async with self._send_lock:
            await self.ws.send(data)

    async def _close(self, code: int) -> None:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            await self.ws.close(code)


def _pack_encode(packer: MediaPacker, chunk: OutChunk) -> list[tuple[Any, bytes]]:
    return [(msg, encode(msg)) for msg in packer.pack(chunk)]


def _frames_of(msg: Any, by_idx: dict[int, OutFrame]) -> list[OutFrame]:
    if isinstance(msg, Frame):
        return [by_idx[msg.idx]]
    if isinstance(msg, Media):
        return [by_idx[i] for i in range(msg.idx, msg.idx + msg.n) if i in by_idx]
    return []

