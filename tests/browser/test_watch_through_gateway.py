"""A share link made through a fleet gateway, in Chromium: a direct-mode `sessiond gateway` (it serves
the pages; media goes to the workers, which allow the gateway's origin with `--cors-origins`) over
two tiny CPU workers. The World page's Share link names the gateway; watch.html opened from it asks
the gateway where the session is and plays from the worker that holds it; that worker drains
(SIGTERM): the open watch page follows `moved` to the other worker, and the SAME link opened in a
new page after the move plays from there. Co-players from invite links made there (one over WebRTC,
one over the fMP4 WebSocket) follow the drain too, with their invite tokens, and steer there."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, expect

from fleet.local import LocalFleet, local_fleet
from tests.fleet._fleet import bound_worker

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.redis]

KEYS = ("w1/cpu-0", "w1/cpu-1")


@pytest.fixture
def direct_fleet(tmp_path: Path) -> Iterator[tuple[LocalFleet, str]]:
    with local_fleet(tmp_path / "fleet") as fleet:
        url = fleet.start_gateway()
        for key in KEYS:
            fleet.start_worker(key, "--model", "tiny", "--device", "cpu", "--webrtc-hosts", "127.0.0.1",
                               "--max-sessions", "4", "--checkpoint-s", "0.5", "--cors-origins", url)
        fleet.wait_ready(120)
        yield fleet, url


def test_a_watch_link_through_the_gateway_plays_follows_a_drain_and_opens_again(
        chromium: BrowserContext, direct_fleet: tuple[LocalFleet, str]) -> None:
    """... and a watch page over the fMP4 WebSocket (a browser without WebRTC) follows the drain
    too: its reconnect closes the old MsePlayer (MediaSource ended, object URL revoked, detached),
    so it has exactly one live player, and the new one plays on."""
    fleet, gw = direct_fleet
    owner, viewer, later = chromium.new_page(), chromium.new_page(), chromium.new_page()
    fmp4 = chromium.new_page()
    fmp4.add_init_script("delete window.RTCPeerConnection;")
    try:
        owner.goto(f"{gw}/world.html")
        owner.wait_for_function("window.world && window.world.framesDecoded >= 8", timeout=60_000)
        sid = owner.evaluate("world.session.session_id")
        under = bound_worker(fleet.redis_url, sid)
        owner.click("#share")
        box = owner.locator("#share-box input.share-url")
        expect(box).to_be_visible()
        link = box.input_value()
        assert re.fullmatch(rf"{re.escape(gw)}/watch\.html\?session={sid}&token=[A-Za-z0-9_\-]+", link)

        viewer.goto(link)
        viewer.wait_for_function("window.watch && window.watch.framesDecoded >= 8", timeout=60_000)
        assert viewer.evaluate("watch.transport") == "webrtc"
        assert viewer.evaluate("watch.session.webrtc_url") == f"{fleet.workers[under][1]}/v1/sessions/{sid}/webrtc"
        received = viewer.evaluate("watch.framesReceived")
        fmp4.goto(link)
        fmp4.wait_for_function("window.watch && watch.framesDecoded >= 8", timeout=60_000)
        assert fmp4.evaluate("[watch.transport, watch.msePlayers]") == ["fmp4", 1]
        fmp4.evaluate("window.firstPlayer = watch.mse")
        fmp4_received = fmp4.evaluate("watch.framesReceived")

        fleet.workers[under][0].send_signal(signal.SIGTERM)  # drain: every page is told `moved`
        assert fleet.workers[under][0].wait(60) == 0
        other = bound_worker(fleet.redis_url, sid)
        assert other != under and other in KEYS
        viewer.wait_for_function(f"watch.moves >= 1 && watch.framesReceived >= {received + 16}", timeout=60_000)
        assert viewer.evaluate("watch.session.webrtc_url") == f"{fleet.workers[other][1]}/v1/sessions/{sid}/webrtc"
        # the fMP4 page reconnected with a new player and closed the old one; frames keep arriving
        fmp4.wait_for_function(f"watch.moves >= 1 && watch.framesReceived >= {fmp4_received + 16}", timeout=60_000)
        fmp4.wait_for_function("watch.mse !== window.firstPlayer && watch.mse.appended >= 8", timeout=30_000)
        assert fmp4.evaluate("""[watch.msePlayers, firstPlayer.closed, firstPlayer.buffer,
            firstPlayer.source.readyState === "open", document.getElementById("video").src === firstPlayer.url,
            document.getElementById("video").src === watch.mse.url]""") == [1, True, None, False, False, True]
        shown = fmp4.evaluate("document.getElementById('video').currentTime")
        fmp4.wait_for_function(f"document.getElementById('video').currentTime >= {shown + 1}", timeout=30_000)
        assert fmp4.evaluate("watch.errors") == []

        later.goto(link)  # the same link, after the move
        later.wait_for_function("window.watch && window.watch.framesDecoded >= 8", timeout=60_000)
        assert later.evaluate("watch.session.webrtc_url") == f"{fleet.workers[other][1]}/v1/sessions/{sid}/webrtc"
        assert (viewer.evaluate("watch.errors"), later.evaluate("watch.errors")) == ([], [])
        expect(later.locator("#viewers")).to_have_text("3")  # viewer, fmp4 and later
    finally:
        for page in (fmp4, later, viewer, owner):
            page.close()


def _session_on(fleet: LocalFleet, key: str, sid: str) -> str:
    return f"{fleet.workers[key][1]}/v1/sessions/{sid}"


def test_invite_links_through_the_gateway_follow_a_drain(chromium: BrowserContext,
                                                         direct_fleet: tuple[LocalFleet, str]) -> None:
    """Two co-players from invite links made through the gateway, one over WebRTC and one over the
    fMP4 WebSocket (a browser without WebRTC): the worker holding the session drains, and each
    co-player's page follows `moved` to the other worker with its invite token, keeps its seat, and
    its keys steer there (its own action_seq comes back applied, its action-to-photon counted)."""
    fleet, gw = direct_fleet
    owner, rtc_player, ws_player = chromium.new_page(), chromium.new_page(), chromium.new_page()
    ws_player.add_init_script("delete window.RTCPeerConnection;")
    players = ((rtc_player, 1, "webrtc", "world.framesDecoded"), (ws_player, 2, "websocket", "world.framesReceived"))
    try:
        owner.goto(f"{gw}/world.html")
        owner.wait_for_function("window.world && window.world.framesDecoded >= 8", timeout=60_000)
        sid = owner.evaluate("world.session.session_id")
        under = bound_worker(fleet.redis_url, sid)
        for page, seat, transport, frames in players:
            owner.click("#invite")
            owner.wait_for_function(f"(world.links || []).filter((l) => l.kind === 'players').length === {seat}")
            link = owner.evaluate("world.links.at(-1)")
            assert link["player"] == seat
            assert re.fullmatch(rf"{re.escape(gw)}/world\.html\?session={sid}&token=[A-Za-z0-9_\-]+", link["url"])
            page.goto(link["url"])
            page.wait_for_function(f"window.world && world.player === {seat} && {frames} >= 8", timeout=60_000)
            assert page.evaluate("world.transport") == transport
            assert page.evaluate("world.session.ws_url").endswith(f"/v1/sessions/{sid}/ws")
            assert page.evaluate("world.session.webrtc_url") == f"{_session_on(fleet, under, sid)}/webrtc"

        fleet.workers[under][0].send_signal(signal.SIGTERM)  # drain: every page is told `moved`
        assert fleet.workers[under][0].wait(60) == 0
        other = bound_worker(fleet.redis_url, sid)
        assert other != under and other in KEYS
        for page, seat, transport, _ in players:
            page.wait_for_function("world.reconnects >= 1", timeout=60_000)
            assert page.evaluate("world.session.webrtc_url") == f"{_session_on(fleet, other, sid)}/webrtc"
            assert page.evaluate("world.transport") == transport
            assert page.evaluate("world.player") == seat
            shown = page.evaluate("world.frameIdx")  # the session's frame idx (a new peer counts from 0)
            page.wait_for_function(f"world.frameIdx >= {shown + 16}", timeout=60_000)  # it plays from there
            # its keys steer at the new place: its own action_seq comes back applied, counted
            page.locator("body").click(position={"x": 5, "y": 5})
            sent = page.evaluate("world.actionSent")
            page.keyboard.down("KeyD")
            page.wait_for_function(f"world.actionSeq > {sent}", timeout=30_000)
            page.keyboard.up("KeyD")
            expect(page.locator("#a2p")).to_have_text(re.compile(r"^\d+ ms$"))
            expect(page.locator("#status")).to_contain_text("Playing")
            assert page.evaluate("world.errors") == []
        expect(owner.locator("#presence")).to_contain_text("player 1")
        expect(owner.locator("#presence")).to_contain_text("player 2")
    finally:
        for page in (ws_player, rtc_player, owner):
            page.close()
