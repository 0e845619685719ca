"""The director page against the real daemon: fMP4 over the WebSocket plays in Chromium's
Media Source Extensions through two segments, and an interrupt stops the segment."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium takes seconds to start

FPS = 16


def _open_director(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/director.html")
    page.wait_for_function("window.director && typeof director.direct === 'function' && director.codec", timeout=30_000)


def _segment(page: Page, segment: int) -> dict:
    return page.evaluate(f"director.segments.find((s) => s.segment === {segment})")


def test_fmp4_plays_through_two_segments(page: Page, daemon_url: str) -> None:
    _open_director(page, daemon_url)
    assert page.evaluate("director.codec").startswith("avc1.42C0")
    page.evaluate("director.direct('a lighthouse at dusk', 1.0)")
    page.wait_for_function("director.segments.length === 1 && director.segments[0].status", timeout=45_000)
    page.evaluate("director.direct('waves breaking on the rocks', 1.0)")
    page.wait_for_function("director.segments.length === 2 && director.segments[1].pts !== null", timeout=45_000)
    second = page.evaluate("director.segments[1]")
    start_s = second["pts"] / 90000
    page.wait_for_function(
        f"document.getElementById('video').currentTime > {start_s + 2 / FPS}", timeout=30_000)
    first = page.evaluate("director.segments[0]")
    assert first["pts"] == 0
    assert second["pts"] == first["endPts"] > 0
    assert page.evaluate("director.errors") == []


def test_interrupt_ends_the_segment_and_stops_its_media(page: Page, daemon_url: str) -> None:
    _open_director(page, daemon_url)
    page.evaluate("director.direct('a very long take', 20.0)")
    page.wait_for_function("director.fragments >= 2", timeout=45_000)
    page.evaluate("director.interrupt()")
    page.wait_for_function("director.segments[0] && director.segments[0].status", timeout=30_000)
    segment = page.evaluate("director.segments[0]")
    assert segment["status"] == "interrupted"
    ack = page.evaluate("director.acks.find((a) => a.pts !== undefined)")
    assert ack is not None
    fragments = page.evaluate("director.fragments")
    page.wait_for_timeout(1500)
    assert page.evaluate("director.fragments") == fragments  # nothing more after the interrupt
    last_end = page.evaluate("director.player.liveEdge()")
    assert last_end <= ack["pts"] / 90000 + 1 / FPS + 1e-6
    assert segment["frames"] < 20 * FPS
