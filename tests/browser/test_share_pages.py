"""Share links and co-play in Chromium against the real daemon (tiny model): the World page's Share
button shows a watch link, watch.html plays it and counts its viewers; Invite player gives a play
link whose page joins the same world as player 1 (over WebRTC; over the fMP4 WebSocket in a browser
without it), its keys come back in its own action_seq and its page shows its own action-to-photon,
and both pages show who plays; the Director
page shares too."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import BrowserContext, Page, expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium takes seconds to start


def _owner(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/world.html")
    page.wait_for_function("window.world && window.world.framesDecoded >= 8", timeout=45_000)


def _link(page: Page, button: str) -> str:
    page.click(button)
    url = page.locator("#share-box input.share-url")
    expect(url).to_be_visible()
    value = url.input_value()
    expect(page.locator("#share-box button.share-copy")).to_have_text("Copy")
    return value


def test_share_shows_a_watch_link_that_plays_and_counts_its_viewers(chromium: BrowserContext, daemon_url: str
                                                                   ) -> None:
    owner = chromium.new_page()
    viewer = chromium.new_page()
    try:
        _owner(owner, daemon_url)
        sid = owner.evaluate("world.session.session_id")
        url = _link(owner, "#share")
        assert re.fullmatch(rf"{re.escape(daemon_url)}/watch\.html\?session={sid}&token=[A-Za-z0-9_\-]+", url)
        viewer.goto(url)
        viewer.wait_for_function("window.watch && window.watch.framesDecoded >= 8", timeout=45_000)
        assert viewer.evaluate("watch.transport") == "webrtc"  # the shared spectator stream (fMP4 is the fallback)
        # the moment its first frame showed, in ms since the page began to load (the benchmark reads it)
        assert viewer.evaluate("typeof watch.firstFrameMs === 'number' && watch.firstFrameMs > 0") is True
        expect(viewer.locator("#mode")).to_have_text("world")  # from the status: WebRTC brings no welcome
        expect(viewer.locator("#viewers")).to_have_text("1")
        expect(viewer.locator("#presence")).to_contain_text("owner")
        expect(viewer.locator("#presence")).to_contain_text("1 watching")
        expect(owner.locator("#presence")).to_contain_text("1 watching")
        assert viewer.evaluate("watch.errors") == []
        assert viewer.locator("button").count() == 0  # nothing to steer with
    finally:
        viewer.close()
        owner.close()


def _play_invite(owner: Page, player: Page, daemon_url: str, frames: str) -> None:
    """The owner's invite link opens the World page as player 1, whose keys come back in its own
    action_seq; `frames` is the page's count of frames it got (a JS expression)."""
    _owner(owner, daemon_url)
    # the owner has played a while: its own actions numbered far above what the player will send
    owner.locator("body").click(position={"x": 5, "y": 5})
    owner.keyboard.down("KeyW")
    owner.wait_for_function("world.actionSeq >= 40", timeout=30_000)
    owner.keyboard.up("KeyW")
    sid = owner.evaluate("world.session.session_id")
    url = _link(owner, "#invite")
    assert re.fullmatch(rf"{re.escape(daemon_url)}/world\.html\?session={sid}&token=[A-Za-z0-9_\-]+", url)
    assert owner.evaluate("world.links.at(-1).player") == 1
    player.goto(url)
    player.wait_for_function(f"window.world && window.world.player === 1 && {frames} >= 8", timeout=45_000)
    assert player.evaluate("world.session.session_id") == sid
    expect(player.locator("#role")).to_contain_text("You are player 1")
    expect(player.locator("#interrupt")).to_be_hidden()
    expect(player.locator("#share")).to_be_hidden()
    # nothing sent: no own action applied, even in the frames made before it sat (never the owner's)
    assert player.evaluate("world.actionSeq") == -1
    assert player.evaluate("world.frames.every((f) => f.action_seq === -1)") is True
    player.locator("body").click(position={"x": 5, "y": 5})
    player.keyboard.down("KeyD")
    player.wait_for_function("world.actionSent >= 3", timeout=10_000)
    player.wait_for_function("world.actionSeq >= 0", timeout=30_000)  # its own action came back applied
    player.keyboard.up("KeyD")
    frame = player.evaluate("world.frames.filter((f) => f.action_seq >= 0).at(-1)")
    assert frame["players"][1] == frame["action_seq"]  # the frame tells each player its own seq
    # its own action-to-photon: its sent actions matched to the frames that applied them (WebRTC:
    # the frame on screen, by its RTP timestamp; WebSocket: the fragment's arrival)
    expect(player.locator("#a2p")).to_have_text(re.compile(r"^\d+ ms$"))
    assert player.evaluate("world.a2p.length >= 1 && world.a2p.every((ms) => ms > 0)") is True
    expect(owner.locator("#presence")).to_contain_text("player 1")
    expect(player.locator("#presence")).to_contain_text("owner")
    expect(player.locator("#presence")).to_contain_text("player 1 (you)")
    assert player.evaluate("world.errors") == []


def test_an_invite_link_joins_the_world_over_webrtc_as_a_player_whose_keys_steer_it(
        chromium: BrowserContext, daemon_url: str) -> None:
    owner = chromium.new_page()
    player = chromium.new_page()
    try:
        _play_invite(owner, player, daemon_url, "world.framesDecoded")
        assert owner.evaluate("world.transport") == "webrtc"
        assert player.evaluate("world.transport") == "webrtc"  # its video: decoded from the shared encode
        assert player.evaluate("world.frames.at(-1).t") == "frames"  # its metadata: on its control channel
    finally:
        player.close()
        owner.close()


def test_without_webrtc_an_invite_link_joins_over_the_websocket(chromium: BrowserContext, daemon_url: str) -> None:
    owner = chromium.new_page()
    player = chromium.new_page()
    player.add_init_script("delete window.RTCPeerConnection;")  # a browser without WebRTC
    try:
        _play_invite(owner, player, daemon_url, "world.framesReceived")
        assert player.evaluate("world.transport") == "websocket"
    finally:
        player.close()
        owner.close()


def test_the_director_page_shares_a_watch_link(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/director.html")
    page.wait_for_function("window.director && window.director.connected", timeout=45_000)
    sid = page.evaluate("director.session.session_id")
    url = _link(page, "#share")
    assert re.fullmatch(rf"{re.escape(daemon_url)}/watch\.html\?session={sid}&token=[A-Za-z0-9_\-]+", url)


@pytest.mark.parametrize("transport", ["webrtc", "websocket"])
def test_an_invite_opened_in_a_second_tab_takes_the_seat_and_the_first_tab_says_so(
        chromium: BrowserContext, daemon_url: str, transport: str) -> None:
    """The same invite link in a second tab (a reload, another device): the newest page plays the
    seat, its keys steer at once (its seq continues the seat's), the first page stops at once in
    words and never reconnects by itself (the two would take the seat from each other for ever); its
    "Play here" takes the seat back on purpose. The owner plays on throughout."""
    owner, first, second = chromium.new_page(), chromium.new_page(), chromium.new_page()
    frames = "world.framesDecoded"
    if transport == "websocket":
        for page in (first, second):
            page.add_init_script("delete window.RTCPeerConnection;")  # a browser without WebRTC
        frames = "world.framesReceived"
    try:
        _owner(owner, daemon_url)
        url = _link(owner, "#invite")
        first.goto(url)
        first.wait_for_function(f"window.world && world.player === 1 && {frames} >= 8", timeout=45_000)
        first.locator("body").click(position={"x": 5, "y": 5})
        first.keyboard.down("KeyD")
        first.wait_for_function("world.actionSeq >= 10", timeout=30_000)  # the seat's seq, well on
        first.keyboard.up("KeyD")
        sent_by_first = first.evaluate("world.actionSent")

        second.goto(url)
        second.wait_for_function(f"window.world && world.player === 1 && {frames} >= 8", timeout=45_000)
        assert second.evaluate("world.transport") == transport
        # the first page is told at once, in words, with a way to take the seat back
        first.wait_for_function("world.takenOver !== null && world.takenOver !== undefined", timeout=10_000)
        assert first.evaluate("[world.takenOver.code, world.takenOver.fatal]") == ["conflict", True]
        expect(first.locator("#status")).to_have_text("This seat is now played on another page")
        expect(first.locator("#error")).to_contain_text("Your invite link was opened again")
        expect(first.locator("#error-retry")).to_have_text("Play here")
        # the second page's first action steers: its seq continues above the first page's
        second.locator("body").click(position={"x": 5, "y": 5})
        second.keyboard.down("KeyA")
        second.wait_for_function(f"world.actionSeq > {sent_by_first}", timeout=30_000)
        second.keyboard.up("KeyA")
        # it plays on, and the first page stays stopped: it did not take the seat back by itself
        played = second.evaluate(frames)
        second.wait_for_function(f"{frames} >= {played + 96}", timeout=45_000)  # 6 s of frames at 16 fps
        assert first.evaluate("world.reconnects || 0") == 0
        assert second.evaluate("world.takenOver || null") is None
        assert second.evaluate("world.errors") == []
        expect(second.locator("#status")).to_contain_text("Playing")
        expect(owner.locator("#presence")).to_contain_text("player 1")
        decoded = owner.evaluate("world.framesDecoded")
        owner.wait_for_function(f"world.framesDecoded >= {decoded + 16}", timeout=30_000)  # the owner plays on
        assert owner.evaluate("world.errors") == []

        shown = first.evaluate("world.frameIdx")  # the session's frame index: it moves on once playing again
        first.click("#error-retry")  # "Play here": the seat comes back here, the second page says so
        first.wait_for_function(f"world.takenOver === null && world.frameIdx >= {shown + 16}", timeout=45_000)
        second.wait_for_function("world.takenOver && world.takenOver.code === 'conflict'", timeout=10_000)
        expect(second.locator("#error-retry")).to_have_text("Play here")
    finally:
        for page in (second, first, owner):
            page.close()
