"""A spectator's WebSocket: hello -> welcome, then the session's SHARED packed stream.

Like `transports.websocket` on the way in (the one inbound reader: limits, request rate, abuse;
the messages go to the port, which answers what a spectator may not send with `forbidden`), but
nothing is packed here: the writer sends the shared packer's init messages, then the bytes its
audience member queue hands out (its own replies first). A socket that takes nothing for
`stall_s` (the send does not complete: the client reads nothing) is dropped with a fatal
`rate_limited` close (1008) and counted; it never holds anything else back, since every other
spectator and the owner have their own queues.

`on_send_cpu`, when given, hears the event loop thread's CPU seconds of each send that completed
without waiting (framing and the socket write: what one more spectator costs beyond the shared
packing). A send that had to wait for the socket is not reported: the thread ran other tasks
meanwhile, so its CPU time says nothing about this send.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from protocols.codec import encode
from protocols.errors import ErrorCode
from protocols.http import ws_close_code_for
from protocols.messages import PROTOCOL_VERSION, ClientMessage, Error, Limits, Welcome
from transports.fanout import Packed
from transports.inbound import InboundLimits, InboundReader
from transports.websocket import CLOSE_ABUSE, CLOSE_NORMAL, HelloGate, WireSocket

__all__ = ["AudiencePort", "SpectatorConnection", "SpectatorOptions"]

logger = logging.getLogger(__name__)


class AudiencePort(Protocol):
    """One spectator's view of a session (sessiond implements it)."""

    session_id: str
    init: list[bytes]  # the shared packer's messages before any media (fmp4: init)

    def submit(self, message: ClientMessage) -> None: ...

    async def next_output(self) -> Packed | Any | None:
        """Shared packed bytes, or one of its own messages (encoded here); None once it ends."""
        ...

    def mark_sent(self, item: Packed) -> None: ...

    def stalled(self) -> None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class SpectatorOptions:
    limits: Limits
    hello_timeout_s: float = 10.0
    stall_s: float = 10.0  # a send that does not complete this long: the spectator reads nothing, dropped
    inbound: InboundLimits = field(default_factory=InboundLimits)


class _Abusive(Exception):
    pass


class _Stalled(ConnectionError):
    pass


class SpectatorConnection(HelloGate):
    def __init__(self, ws: WireSocket, attach: Callable[[], Awaitable[AudiencePort]], welcome_session: dict[str, Any],
                 options: SpectatorOptions, *, on_error: Callable[[str], None] | None = None,
                 on_send_cpu: Callable[[float], None] | None = None,
                 cpu_clock: Callable[[], float] = time.thread_time) -> None:
        self.ws = ws
        self._attach = attach
        self.welcome_session = welcome_session
        self.options = options
        self._reader = InboundReader(options.inbound, hello_required=True, on_error=on_error)
        self._hello_timeout_s = options.hello_timeout_s
        self._send_lock = asyncio.Lock()
        self._port: AudiencePort | None = None
        self._on_send_cpu = on_send_cpu
        self._cpu_clock = cpu_clock  # this thread's CPU seconds (tests inject one)
        self.stalled = False

    async def run(self) -> None:
        try:
            if not await self._handshake():
                return
            self._port = await self._attach()
            await self._send(encode(Welcome(v=PROTOCOL_VERSION, session=self.welcome_session,
                                            limits=self.options.limits)))
            port = self._port
            reader = asyncio.create_task(self._read_loop(port), name=f"spectator-read-{port.session_id}")
            writer = asyncio.create_task(self._write_loop(port), name=f"spectator-write-{port.session_id}")
            done = await self._until_one_stops(reader, writer)
            code = CLOSE_NORMAL
            for task in done:
                exc = task.exception()
                if isinstance(exc, _Abusive | _Stalled):
                    code = CLOSE_ABUSE
                elif exc is not None and not isinstance(exc, ConnectionError | OSError):
                    logger.error("spectator of session %s failed: %r", port.session_id, exc)
            fatal = writer.result() if writer in done and writer.exception() is None else None
            if fatal is not None:
                code = _close_code(fatal)
            await self._close(code)
        finally:
            if self._port is not None:
                await self._port.close()

    async def _read_loop(self, port: AudiencePort) -> None:
        while True:
            data = await self.ws.receive()
            if data is None:
                return
            verdict = self._reader.read(data)
            if verdict.error is not None:
                if not await self._answer(verdict.error):
                    raise _Abusive
            elif verdict.message is not None:
                port.submit(verdict.message)

    async def _write_loop(self, port: AudiencePort) -> Error | None:
        """Returns the fatal error it stopped after (revoked, session closed, too many replies)."""
        for data in port.init:
            await self._send(data)
        fatal: Error | None = None
        while True:
            item = await port.next_output()
            if item is None:
                return fatal
            if isinstance(item, Packed):
                await self._send(item.data)
                port.mark_sent(item)
            else:
                if fatal is None and isinstance(item, Error) and item.fatal:
                    fatal = item
                await self._send(encode(item))

    async def _send(self, data: bytes) -> None:
        async with self._send_lock:
            try:
                async with asyncio.timeout(self.options.stall_s):  # in this task: its CPU time is this send's
                    await self._timed_send(data)
            except TimeoutError:
                self.stalled = True
                if self._port is not None:
                    self._port.stalled()
                raise _Stalled from None

    async def _timed_send(self, data: bytes) -> None:
        """The send, and its thread CPU time when it completed without letting the loop turn (a
        callback scheduled now runs only if this task waited)."""
        if self._on_send_cpu is None:
            await self.ws.send(data)
            return
        waited: list[bool] = []
        marker = asyncio.get_running_loop().call_soon(waited.append, True)
        began = self._cpu_clock()
        try:
            await self.ws.send(data)
        finally:
            cpu_s = self._cpu_clock() - began
            marker.cancel()
        if not waited:
            self._on_send_cpu(cpu_s)

    async def _close(self, code: int) -> None:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError, TimeoutError):
            await asyncio.wait_for(self.ws.close(code), 2.0)


def _close_code(error: Error) -> int:
    """4401 for a revoked link, 4404 for a closed session, ...; 1008 for abuse."""
    if error.code == ErrorCode.RATE_LIMITED.value:
        return CLOSE_ABUSE
    return ws_close_code_for(error.code)
