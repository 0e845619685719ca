"""The world page against the real daemon: WebRTC video decodes in Chromium, keypresses
arrive as `action` messages and show up in the frames' `action_seq`."""

from __future__ import annotations

import io
import itertools

import pytest
from PIL import Image, ImageStat
from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium takes seconds to start


def _open_world(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/world.html")
    page.wait_for_function("window.world && window.world.framesDecoded >= 8", timeout=45_000)


def test_webrtc_video_decodes_frames_and_is_not_blank(page: Page, daemon_url: str) -> None:
    _open_world(page, daemon_url)
    first = page.evaluate("world.framesDecoded")
    page.wait_for_function(f"world.framesDecoded >= {first + 16}", timeout=30_000)
    assert page.evaluate("world.errors") == []
    assert page.inner_text("#status") == "connected"
    shot = Image.open(io.BytesIO(page.locator("#video").screenshot())).convert("RGB")
    width, height = shot.size
    picture = shot.crop((width // 4, height // 4, 3 * width // 4, 3 * height // 4))  # inside the letterbox
    assert max(ImageStat.Stat(picture).stddev) > 8.0  # real content, not one flat colour
    assert len(picture.getcolors(maxcolors=1 << 20) or []) > 50


def test_frames_messages_map_rtp_timestamps_to_frame_indices(page: Page, daemon_url: str) -> None:
    _open_world(page, daemon_url)
    page.wait_for_function("world.frameIdx >= 8", timeout=30_000)  # requestVideoFrameCallback rtpTimestamp -> idx
    frames = page.evaluate("world.frames")
    assert frames[0]["idx"] == 0 and frames[0]["pts"] == 0
    for a, b in itertools.pairwise(frames):
        assert b["idx"] == a["idx"] + a["n"]
        assert b["pts"] == round(b["idx"] * 90000 / 16)


def test_keypresses_arrive_as_actions_and_change_action_seq(page: Page, daemon_url: str) -> None:
    _open_world(page, daemon_url)
    assert page.evaluate("[world.actionSent, world.actionSeq]") == [-1, -1]  # nothing held: nothing sent
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.down("KeyW")
    page.wait_for_function("world.actionSent >= 5", timeout=10_000)
    page.wait_for_function("world.actionSeq >= 0", timeout=30_000)
    page.keyboard.up("KeyW")
    held_seq = page.evaluate("world.actionSeq")
    page.keyboard.down("KeyD")
    page.wait_for_function(f"world.actionSeq > {held_seq}", timeout=30_000)
    page.keyboard.up("KeyD")
    assert page.evaluate("world.errors") == []


def test_media_flows_only_between_loopback_addresses(page: Page, daemon_url: str) -> None:
    _open_world(page, daemon_url)
    pairs = page.evaluate("""async () => {
      const report = await world.pc.getStats();
      const out = [];
      report.forEach((s) => {
        if (s.type === "candidate-pair" && s.state === "succeeded") {
          out.push([report.get(s.localCandidateId).address, report.get(s.remoteCandidateId).address]);
        }
      });
      return out;
    }""")
    assert pairs and {address for pair in pairs for address in pair} == {"127.0.0.1"}
