"""`RtcpWatch`: a viewer is gone when our media has gone unanswered by RTCP longer than the
silence limit; never while nothing is sent; any RTCP answers all media before it."""

from __future__ import annotations

from typing import Any

from transports.webrtc._liveness import RtcpWatch


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_media_unanswered_past_the_limit_means_gone() -> None:
    clock = _Clock()
    watch = RtcpWatch(3.0, clock=clock)
    watch.media_sent()
    clock.t += 1.0
    watch.media_sent()  # later media does not restart the count
    clock.t += 2.0
    assert watch.silent_for() == 3.0 and not watch.gone()
    clock.t += 0.01
    assert watch.gone()


def test_rtcp_answers_the_media_before_it() -> None:
    clock = _Clock()
    watch = RtcpWatch(3.0, clock=clock)
    for _ in range(10):  # a live viewer: a report about every second
        watch.media_sent()
        clock.t += 1.0
        watch.heard()
        assert not watch.gone()
    watch.media_sent()
    clock.t += 3.5
    assert watch.gone() and watch.last_heard == 110.0


def test_no_media_sent_is_never_gone() -> None:
    clock = _Clock()
    watch = RtcpWatch(3.0, clock=clock)
    watch.heard()
    clock.t += 60.0  # a paused session: nothing sent, the receiver may stop reporting
    assert watch.silent_for() is None and not watch.gone()


async def test_watch_sender_counts_rtcp_and_still_hands_it_to_aiortc() -> None:
    handled: list[Any] = []

    class Sender:
        async def _handle_rtcp_packet(self, packet: Any) -> None:
            handled.append(packet)

    clock = _Clock()
    watch = RtcpWatch(3.0, clock=clock)
    sender = Sender()
    watch.watch_sender(sender)
    watch.media_sent()
    clock.t += 2.0
    await sender._handle_rtcp_packet("rr")
    assert handled == ["rr"] and watch.last_heard == 102.0 and watch.silent_for() is None


async def test_wait_gone_tells_on_gone_why_once() -> None:
    clock = _Clock()
    watch = RtcpWatch(3.0, clock=clock)
    heard: list[str] = []
    watch.on_gone = heard.append
    watch.media_sent()
    clock.t += 3.5
    assert await watch.wait_gone(poll_s=0.0) == 3.5
    assert heard == ["rtcp_silent"]
