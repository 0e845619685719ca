"""A spectator's WebSocket handler: a socket whose sends stop completing is dropped after the
stall bound (close 1008, the port told), and a fatal error from the session closes with its code."""

from __future__ import annotations

import asyncio
from typing import Any

from protocols.codec import decode, encode
from protocols.messages import Error, Hello, Limits, Welcome
from transports.fanout import Packed
from transports.spectator import SpectatorConnection, SpectatorOptions

LIMITS = Limits(max_message_bytes=65536, max_actions_per_s=240, max_prompt_chars=2000, window_frames=16)


class StuckSocket:
    """Takes the hello, the welcome and `room` more messages, then sends never complete (a client
    that reads nothing, its buffers full)."""

    def __init__(self, room: int) -> None:
        self.inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.inbox.put_nowait(encode(Hello(v=1)))
        self.sent: list[bytes] = []
        self.room = room
        self.closed_with: int | None = None

    async def receive(self) -> bytes | str | None:
        return await self.inbox.get()

    async def send(self, data: bytes) -> None:
        if len(self.sent) > self.room:
            await asyncio.Event().wait()
        self.sent.append(data)

    async def close(self, code: int, reason: str = "") -> None:
        self.closed_with = code
        self.inbox.put_nowait(None)


class Port:
    session_id = "s_1"
    init: list[bytes] = []

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.marked: list[int] = []
        self.stalls = 0
        self.closed = False

    def submit(self, message: Any) -> None:
        pass

    async def next_output(self) -> Any:
        return self.items.pop(0) if self.items else None  # None: the member has ended

    def mark_sent(self, item: Packed) -> None:
        self.marked.append(item.idx)

    def stalled(self) -> None:
        self.stalls += 1

    async def close(self) -> None:
        self.closed = True


def test_a_spectator_whose_socket_takes_nothing_is_dropped_after_the_stall_bound() -> None:
    async def run() -> None:
        ws = StuckSocket(room=3)
        port = Port([Packed(b"f%d" % i, i, 1, True) for i in range(10)])

        async def attach() -> Port:
            return port

        conn = SpectatorConnection(ws, attach, {"session_id": "s_1", "role": "viewer"},
                                   SpectatorOptions(limits=LIMITS, stall_s=0.2))
        await asyncio.wait_for(conn.run(), 5.0)
        assert isinstance(decode(ws.sent[0], max_bytes=1 << 20, expect="server"), Welcome)
        assert ws.sent[1:] == [b"f0", b"f1", b"f2"]  # then the 4th send never completed
        assert (port.marked, port.stalls, conn.stalled, ws.closed_with, port.closed) == ([0, 1, 2], 1, True, 1008,
                                                                                       True)

    asyncio.run(run())


def test_a_fatal_error_from_the_session_closes_with_its_code() -> None:
    async def run() -> None:
        ws = StuckSocket(room=100)
        port = Port([Packed(b"f0", 0, 1, True), Error(code="unauthorized", message="revoked", fatal=True)])

        async def attach() -> Port:
            return port

        conn = SpectatorConnection(ws, attach, {"session_id": "s_1"}, SpectatorOptions(limits=LIMITS))
        await asyncio.wait_for(conn.run(), 5.0)
        assert ws.closed_with == 4401 and port.marked == [0] and port.closed

    asyncio.run(run())


def test_each_send_that_did_not_wait_reports_its_cpu_time_and_one_that_waited_does_not() -> None:
    """A send that let the loop turn ran other tasks meanwhile: its CPU time is not this send's."""
    cpu = [10.0]

    class Socket(StuckSocket):
        async def send(self, data: bytes) -> None:
            if data.startswith(b"wait"):
                cpu[0] += 1.0
                await asyncio.sleep(0)  # waits for the socket: the loop turns
            else:
                cpu[0] += 0.25
            self.sent.append(data)

    async def run() -> None:
        ws = Socket(room=100)
        port = Port([Packed(b"f0", 0, 1, True), Packed(b"wait1", 1, 1, False), Packed(b"f2", 2, 1, False)])
        reported: list[float] = []

        async def attach() -> Port:
            return port

        conn = SpectatorConnection(ws, attach, {"session_id": "s_1"}, SpectatorOptions(limits=LIMITS),
                                   on_send_cpu=reported.append, cpu_clock=lambda: cpu[0])
        await asyncio.wait_for(conn.run(), 5.0)
        assert ws.sent[1:] == [b"f0", b"wait1", b"f2"] and port.marked == [0, 1, 2]
        assert reported == [0.25, 0.25, 0.25]  # the welcome, f0 and f2; not wait1

    asyncio.run(run())
