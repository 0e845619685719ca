"""The World page bounds the browser's playout delay (issue 26, item 3): a jitter buffer held over
150 ms for 2 s gets the video a fresh receiver (a new WebRTC peer for the same session), at most
once per 10 s, and the world plays on."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium takes seconds to start


def test_a_buffer_held_over_the_bound_asks_for_one_reset_per_gap(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/")
    answers = page.evaluate("""async () => {
      const { PlayoutBound } = await import("/playout.js");
      const bound = new PlayoutBound();  // 150 ms, held 2 s, at most once per 10 s
      const out = [];
      const readings = [[0, 100], [500, 160], [1000, 400], [2000, 300], [2500, 151], [3000, null],
                        [3500, 200], [5500, 200], [6000, 200], [16000, 200], [16500, 200], [18500, 200]];
      for (const [t, ms] of readings) out.push(bound.tick(t, ms));
      return [out, bound.resets];
    }""")
    # over from 500 ms: 2 s later (2500) a reset; null (no frame out) clears it; over again from 3500:
    # due at 5500 but within 10 s of the last; at 16000 (over since 3500, 13.5 s after): another
    assert answers == [[False, False, False, False, True, False, False, False, False, True, False, False], 2]


def test_a_resync_replaces_the_peer_and_the_world_plays_on(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/world.html")
    page.wait_for_function("window.world && world.framesDecoded >= 16", timeout=45_000)
    first_pc = page.evaluate_handle("world.pc")
    page.evaluate("world.resync()")
    page.wait_for_function("world.pc && world.framesDecoded >= 16 && world.resyncs === 1", timeout=30_000)
    assert page.evaluate("(pc) => pc !== world.pc && pc.connectionState === 'closed'", first_pc)
    decoded = page.evaluate("world.framesDecoded")
    page.wait_for_function(f"world.framesDecoded >= {decoded} + 16", timeout=30_000)
    expect(page.locator("#status")).to_have_text("Playing")
    assert page.evaluate("world.errors") == []
    assert "reconnected the video to play with less delay" in page.locator("#note").inner_text()
