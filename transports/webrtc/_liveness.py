"""A viewer's RTCP as its heartbeat: a receiver that gets our video answers it with RTCP
(receiver reports about once a second, NACK, PLI, REMB). A viewer that vanished without a
goodbye (a killed tab, a cut network) sends nothing; ICE would notice only after its 30 s
consent timeout.

`RtcpWatch` says the viewer is gone when media went out `silence_s` ago and no RTCP came back
since (a viewer killed before its first report included: every WebRTC receiver reports, so a
client must answer our media with RTCP). It never fires while no media goes out (a paused
session: a receiver may stop reporting on a stream that sends nothing).

Mechanism: aiortc's DTLS transport routes each RTCP packet for our video to the sender's
`_handle_rtcp_packet`; `watch_sender` wraps that method on the one sender instance (the
gateway already swaps `_send_keyframe` the same way). Tests assert the effect (a SIGKILLed
viewer is detected within seconds), so an aiortc change that breaks it is caught.

`on_gone`, when set (a spectator's port), hears `rtcp_silent` once when `wait_gone` finds the
viewer gone, so that the drop is counted with its reason (sessiond_spectators_dropped)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

__all__ = ["GONE_REASON", "RtcpWatch"]

GONE_REASON = "rtcp_silent"  # the reason a spectator dropped this way is counted under


class RtcpWatch:
    def __init__(self, silence_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.silence_s = silence_s
        self._clock = clock
        self.last_heard: float | None = None
        self._unanswered_since: float | None = None  # first media sent after the last RTCP heard
        self.on_gone: Callable[[str], None] | None = None

    def heard(self) -> None:
        self.last_heard = self._clock()
        self._unanswered_since = None

    def media_sent(self) -> None:
        if self._unanswered_since is None:
            self._unanswered_since = self._clock()

    def silent_for(self) -> float | None:
        """Seconds the viewer has left our media unanswered; None when it has answered it all."""
        if self._unanswered_since is None:
            return None
        return self._clock() - self._unanswered_since

    def gone(self) -> bool:
        silent = self.silent_for()
        return silent is not None and silent > self.silence_s

    async def wait_gone(self, poll_s: float = 0.25) -> float:
        """Returns (the seconds of silence) once the viewer is gone."""
        while not self.gone():
            await asyncio.sleep(poll_s)
        if self.on_gone is not None:
            self.on_gone(GONE_REASON)
        return self.silent_for() or 0.0

    def watch_sender(self, sender: Any) -> None:
        """Every RTCP packet aiortc routes to this RTP sender counts as the viewer's answer."""
        original = sender._handle_rtcp_packet

        async def handle(packet: Any) -> None:
            self.heard()
            await original(packet)

        sender._handle_rtcp_packet = handle
