"""The world page through a fleet: a `sessiond gateway --proxy` (the page, its create and its WebRTC
offer all on the gateway's origin) over two tiny CPU workers. Draining the worker under the page
(SIGTERM) sends `moved` on the control channel; the page follows it without user action, plays on
from the other worker, and the frames' pts go on from where they were (frames the old worker
announced in a `frames` message but never sent are made again there, marked `disc`)."""

from __future__ import annotations

import itertools
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from fleet.local import LocalFleet, local_fleet
from tests.fleet._fleet import bound_worker

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.redis]

KEYS = ("b1/cpu-0", "b1/cpu-1")


@pytest.fixture
def proxied_fleet(tmp_path: Path) -> Iterator[tuple[LocalFleet, str]]:
    with local_fleet(tmp_path / "fleet") as fleet:
        for key in KEYS:
            fleet.start_worker(key, "--model", "tiny", "--device", "cpu", "--webrtc-hosts", "127.0.0.1",
                               "--max-sessions", "4", "--checkpoint-s", "0.5")
        url = fleet.start_gateway("--proxy")
        fleet.wait_ready(120)
        yield fleet, url


def test_the_world_page_follows_a_drained_worker_and_plays_on(page: Page, proxied_fleet: tuple[LocalFleet, str]
                                                               ) -> None:
    fleet, gw = proxied_fleet
    page.goto(f"{gw}/world.html")
    page.wait_for_function("window.world && window.world.framesDecoded >= 8", timeout=60_000)
    session = page.evaluate("world.session")
    assert session["webrtc_url"] == f"{gw}/v1/sessions/{session['session_id']}/webrtc"
    under = bound_worker(fleet.redis_url, session["session_id"])
    before = page.evaluate("world.frames[world.frames.length - 1]")

    fleet.workers[under][0].send_signal(signal.SIGTERM)  # drain: the page is told `moved` and follows
    page.wait_for_function("(world.reconnects || 0) >= 1 && world.framesDecoded >= 8", timeout=60_000)
    assert fleet.workers[under][0].wait(30) == 0
    other = bound_worker(fleet.redis_url, session["session_id"])
    assert other != under and other in KEYS
    page.wait_for_function(f"world.frames.some((f) => f.idx > {before['idx']} && f.disc)", timeout=30_000)
    assert page.evaluate("world.session.webrtc_url") == session["webrtc_url"]  # the gateway again
    assert page.evaluate("world.errors") == []
    assert page.evaluate("world.steps.at(-1)[0]") == "playing"
    assert page.inner_text("#status").startswith("Playing")  # a loaded box may play slower than real time
    frames = page.evaluate("world.frames")
    for a, b in itertools.pairwise(frames):
        if b.get("disc"):  # the move: frames announced but never sent there are made again, pts going on
            assert b["idx"] > a["idx"] and b["pts"] > a["pts"], (a, b)
        else:
            assert b["idx"] == a["idx"] + a["n"] and b["pts"] > a["pts"], (a, b)
        assert b["pts"] == round(b["idx"] * 90000 / 16)
    assert sum(1 for f in frames if f["idx"] > before["idx"] and f.get("disc")) == 1
