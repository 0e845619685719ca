"""Held keys move the demo world's view the right way, as a player sees it in Chromium.

A World page on the demo model (what `bash scripts/serve.sh` serves), a fresh one per key, holds
each movement key for 2 s (longer on a slow box, until 8 frames were seen, at most 6 s). Every
frame the page displays from 0.8 s after the key went down (action-to-photon on this box is well
under that) until the key goes up is copied from the <video> at 128x128; the camera motion between consecutive copies is found by block matching, as
demo/metrics.py measures the model offline, and summed over the hold."""

from __future__ import annotations

import base64
import functools

import numpy as np
import pytest
from playwright.sync_api import BrowserContext, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from demo.metrics import block_shift, frame_motion
from tests.browser.conftest import Served

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# key -> camera direction (dy, dx) it must move the view
KEYS = {"KeyW": (-1, 0), "KeyA": (0, -1), "KeyS": (1, 0), "KeyD": (0, 1),
        "ArrowUp": (-1, 0), "ArrowLeft": (0, -1), "ArrowDown": (1, 0), "ArrowRight": (0, 1)}
HOLD_MS, SETTLE_MS = 2000, 800
MIN_FRAMES, LONGEST_HOLD_MS = 8, 6000  # a slow box holds the key longer, until 8 frames were seen
SIDE = 128  # the demo model's frame size

# copies each displayed frame of the video into window.grabbed (base64 RGBA) while window.grabbing
GRAB = """(side) => {
  window.grabbed = []; window.grabbing = false;
  const video = document.getElementById("video");
  const canvas = document.createElement("canvas");
  canvas.width = side; canvas.height = side;
  const g = canvas.getContext("2d", { willReadFrequently: true });
  const onFrame = () => {
    if (window.grabbing) {
      g.drawImage(video, 0, 0, side, side);
      const bytes = g.getImageData(0, 0, side, side).data;
      let text = "";
      for (let i = 0; i < bytes.length; i += 8192) text += String.fromCharCode(...bytes.subarray(i, i + 8192));
      window.grabbed.push(btoa(text));
    }
    video.requestVideoFrameCallback(onFrame);
  };
  video.requestVideoFrameCallback(onFrame);
}"""


def _frames(encoded: list[str]) -> np.ndarray:
    rgba = [np.frombuffer(base64.b64decode(e), dtype=np.uint8).reshape(SIDE, SIDE, 4) for e in encoded]
    return np.stack(rgba)[..., :3]


def _hold(page: Page, key: str) -> tuple[float, float, int]:
    """Hold `key` on a playing World page; the camera's summed motion (dy, dx) over the hold and
    how many frames were seen."""
    page.keyboard.down(key)
    page.wait_for_timeout(SETTLE_MS)
    page.evaluate("window.grabbed = []; window.grabbing = true")
    page.wait_for_timeout(HOLD_MS - SETTLE_MS)
    try:
        page.wait_for_function(f"window.grabbed.length >= {MIN_FRAMES}", timeout=LONGEST_HOLD_MS - HOLD_MS)
    except PlaywrightTimeout:
        pass  # the frame count is asserted per key below, with the number seen
    grabbed = page.evaluate("window.grabbing = false; window.grabbed")
    page.keyboard.up(key)
    motion = frame_motion(_frames(grabbed), functools.partial(block_shift, radius=10))
    total = motion.sum(axis=0)
    return float(total[0]), float(total[1]), len(grabbed)


@pytest.fixture(scope="module")
def motion_per_key(chromium: BrowserContext, demo_daemon: Served) -> dict[str, tuple[float, float, int]]:
    """Per key, on a World page of its own (a fresh session: how far the demo model's world holds
    together over minutes of play is the long-play evaluation's question, not this test's): the
    camera's summed motion (dy, dx) in px over the hold, and how many frames it saw."""
    out = {}
    for key in KEYS:
        page = chromium.new_page()
        try:
            page.goto(f"{demo_daemon.url}/world.html")
            page.wait_for_function("window.world && world.framesDecoded >= 16", timeout=60_000)
            page.evaluate(GRAB, SIDE)
            page.locator("body").click(position={"x": 5, "y": 5})
            out[key] = _hold(page, key)
            assert page.evaluate("world.errors") == []
        finally:
            page.close()
    return out


def _moves_the_right_way(motion: tuple[float, float, int], direction: tuple[int, int]) -> bool:
    """The summed motion has the key's sign on its axis, at least 8 px, and at least twice the other axis."""
    dy, dx, _ = motion
    along, across = (dy, dx) if direction[0] else (dx, dy)
    sign = direction[0] or direction[1]
    return sign * along >= 8.0 and abs(along) >= 2 * abs(across)


@pytest.mark.parametrize("key", list(KEYS))
def test_a_held_key_moves_the_view_its_way(motion_per_key: dict[str, tuple[float, float, int]], key: str) -> None:
    dy, dx, frames = motion_per_key[key]
    assert frames >= MIN_FRAMES, f"only {frames} frames displayed during a {LONGEST_HOLD_MS} ms hold"
    assert _moves_the_right_way(motion_per_key[key], KEYS[key]), (
        f"{key}: the view moved dy {dy:+.0f} px, dx {dx:+.0f} px over {frames} frames; expected direction {KEYS[key]}")
