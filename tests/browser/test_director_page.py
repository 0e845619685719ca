"""The director page against the real daemon: fMP4 over the WebSocket plays in Chromium's
Media Source Extensions through two segments, and an interrupt stops the segment; the served
model's example prompts are chips, the default one gives a bright picture, a cue says when a
segment is done, the prompt box keeps the protocol's length and refuses an empty direction."""

from __future__ import annotations

import httpx
import pytest
from PIL import ImageStat
from playwright.sync_api import Page, expect

from demo.themes import PROMPT_EXAMPLES
from tests.browser._frames import mean_luma, video_picture
from tests.browser.conftest import Served, serve

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium takes seconds to start

FPS = 16


def _open_director(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/director.html")
    page.wait_for_function("window.director && typeof director.direct === 'function' && director.codec", timeout=30_000)
    page.wait_for_function("director.steps.at(-1)[0] === 'ready'", timeout=30_000)


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


def test_the_status_line_walks_through_the_loading_steps_to_ready(page: Page, daemon_url: str) -> None:
    _open_director(page, daemon_url)
    assert [tuple(step) for step in page.evaluate("director.steps")] == [
        ("server", "Waiting for the server to be ready…"),
        ("admission", "Creating your session…"),
        ("connecting", "Connecting (WebSocket)…"),
        ("ready", "Ready: pick an example (it plays at once), or write a direction and press Direct"),
    ]
    expect(page.locator("#loading")).to_be_hidden()


def test_the_prompt_box_keeps_the_protocols_length_and_shows_the_count(page: Page, daemon_url: str) -> None:
    _open_director(page, daemon_url)
    assert page.evaluate("director.maxPromptChars") == 2000  # welcome.limits.max_prompt_chars
    box = page.locator("#prompt")
    box.fill("")
    box.type("a river")
    expect(page.locator("#count")).to_have_text("7 / 2000")
    box.fill("x" * 2500)
    assert len(box.input_value()) == 2000
    expect(page.locator("#count")).to_have_text("2000 / 2000")
    page.evaluate("document.getElementById('prompt').value = 'y'.repeat(2500); "
                  "document.getElementById('prompt').dispatchEvent(new Event('input'))")  # a script or paste
    assert len(box.input_value()) == 2000
    expect(page.locator("#prompt-msg")).to_have_text("Directions are limited to 2000 characters; the rest was cut.")


def test_an_empty_direction_is_refused_visibly(page: Page, daemon_url: str) -> None:
    _open_director(page, daemon_url)
    page.fill("#prompt", "   ")
    page.click("#direct")
    message = page.locator("#prompt-msg")
    expect(message).to_be_visible()
    expect(message).to_have_text("Write a direction first, or pick one of the examples.")
    page.wait_for_timeout(1000)
    assert page.evaluate("[director.pending.size, director.segments.length]") == [0, 0]  # nothing was sent


def test_the_tiny_model_names_no_examples_so_no_chips(page: Page, daemon_url: str) -> None:
    _open_director(page, daemon_url)
    expect(page.locator("#examples")).to_be_hidden()
    assert page.input_value("#prompt") == ""


def test_the_demo_models_default_example_gives_a_bright_picture_and_a_done_cue(page: Page, demo_daemon: Served) -> None:
    _open_director(page, demo_daemon.url)
    chips = page.locator("#examples .chip")
    expect(chips).to_have_text(list(PROMPT_EXAMPLES))
    assert page.input_value("#prompt") == PROMPT_EXAMPLES[0]  # pre-filled with the default example
    page.fill("#seconds", "1.5")
    page.click("#direct")
    cue = page.locator("#cue")
    expect(cue).to_have_text("Segment #1 done — direct again", timeout=60_000)
    expect(page.locator("#status")).to_have_text("Segment #1 done — direct again")
    picture = video_picture(page)
    # measured on the raw frames of this prompt: mean luma 113-130 (a dark theme, night: 31)
    assert mean_luma(picture) > 90
    assert max(ImageStat.Stat(picture).stddev) > 8.0  # a landscape, not one flat colour
    assert page.evaluate("director.errors") == []
    chips.nth(2).click()  # another example: a click fills the box and directs at once
    expect(page.locator("#prompt")).to_have_value(PROMPT_EXAMPLES[2])
    expect(cue).to_be_hidden(timeout=30_000)
    expect(cue).to_have_text("Segment #2 done — direct again", timeout=60_000)


def test_directing_without_a_session_says_why_and_sends_nothing(page: Page) -> None:
    with serve("tiny", "--policy", "kv", "--max-sessions", "1") as served:
        held = httpx.post(f"{served.url}/v1/sessions", json={"mode": "world"}).json()
        page.goto(f"{served.url}/director.html")
        expect(page.locator("#status")).to_have_text("The server is full right now", timeout=30_000)
        page.fill("#prompt", "a snowy winter day")
        page.click("#direct")
        message = page.locator("#prompt-msg")
        expect(message).to_have_text("No session to direct yet: The server is full right now")
        page.click("#interrupt")
        expect(message).to_have_text("No session to direct yet: The server is full right now")
        assert page.evaluate("[director.connected, director.pending.size]") == [False, 0]
        httpx.delete(f"{served.url}/v1/sessions/{held['session_id']}",
                     headers={"Authorization": f"Bearer {held['token']}"})
        page.click("#error-retry")
        page.wait_for_function("director.steps.at(-1)[0] === 'ready'", timeout=45_000)
        page.click("#direct")
        page.wait_for_function("director.pending.size === 1 && director.connected", timeout=10_000)


def test_a_page_refused_a_session_still_shows_the_models_examples(page: Page) -> None:
    with serve("demo", "--policy", "kv", "--max-sessions", "1") as served:
        httpx.post(f"{served.url}/v1/sessions", json={"mode": "world"}).raise_for_status()
        page.goto(f"{served.url}/director.html")
        expect(page.locator("#status")).to_have_text("The server is full right now", timeout=60_000)
        chips = page.locator("#examples .chip")
        expect(chips).to_have_text(list(PROMPT_EXAMPLES))
        assert page.input_value("#prompt") == PROMPT_EXAMPLES[0]
        chips.nth(1).click()  # fills the box; with no session it says why and sends nothing
        expect(page.locator("#prompt")).to_have_value(PROMPT_EXAMPLES[1])
        expect(page.locator("#prompt-msg")).to_have_text("No session to direct yet: The server is full right now")
        assert page.evaluate("[director.connected, director.pending.size]") == [False, 0]


def test_a_stall_mid_segment_is_said_counted_once_and_cleared_when_playback_moves(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/")
    ticks = page.evaluate("""async () => {
      const s = await import("/status.js");
      const watch = new s.StallWatch({ stillMs: 750 });
      const out = [];
      let t = 0;
      const tick = (time, active) => { out.push(watch.tick(t, time, active)); t += 250; };
      tick(0, false); tick(0, false); tick(0, false);        // held: standing still is no stall
      tick(0.25, true); tick(0.5, true);                      // playing
      for (let i = 0; i < 6; i++) tick(0.5, true);            // stands still 1.5 s: one stall, said once
      tick(0.75, true);                                       // moves again
      tick(0.75, false); tick(0.75, false); tick(0.75, false); tick(0.75, false);  // segment done
      return { out, stalls: watch.stalls };
    }""")
    assert ticks["out"] == [None] * 5 + [None, None, None, "stalled", None, None] + ["resumed"] + [None] * 4
    assert ticks["stalls"] == 1


def test_a_segment_that_plays_through_counts_no_stall(page: Page, daemon_url: str) -> None:
    _open_director(page, daemon_url)
    page.evaluate("director.direct('rolling hills', 2)")
    page.wait_for_function("director.steps.some(([step]) => step === 'done')", timeout=30_000)
    assert page.evaluate("director.stalls") == 0
    assert [step for step, _ in page.evaluate("director.steps")].count("buffering") == 0
