"""Screenshots of both pages on the embedded demo model, as a newcomer sees them after
`bash scripts/serve.sh`. With SESSIOND_SCREENSHOTS=1 they are written to docs/screenshots/ (the
README shows them); otherwise to a temporary folder, so a normal run leaves the tree alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image, ImageStat
from playwright.sync_api import Page, expect

from tests.browser._frames import mean_luma, video_picture
from tests.browser.conftest import ROOT, Served

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium takes seconds to start


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    if os.environ.get("SESSIOND_SCREENSHOTS") == "1":
        folder = ROOT / "docs" / "screenshots"
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    return tmp_path


def _check(path: Path) -> None:
    image = Image.open(path).convert("RGB")
    assert image.size == (1100, 700)
    assert max(ImageStat.Stat(image).stddev) > 20.0  # a page with a picture in it, not a blank one


def test_world_page_screenshot(page: Page, demo_daemon: Served, shots: Path) -> None:
    page.goto(f"{demo_daemon.url}/world.html")
    page.wait_for_function("window.world && world.steps.at(-1)[0] === 'playing' && world.framesDecoded >= 16",
                           timeout=60_000)
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.down("KeyD")  # walk right for a second: the avatar moves, the held key lights up
    page.wait_for_function("world.actionSeq >= 8", timeout=30_000)
    page.wait_for_timeout(500)
    page.screenshot(path=str(shots / "world.png"))
    page.keyboard.up("KeyD")
    assert mean_luma(video_picture(page)) > 60
    _check(shots / "world.png")


def test_director_page_screenshot(page: Page, demo_daemon: Served, shots: Path) -> None:
    page.goto(f"{demo_daemon.url}/director.html")
    page.wait_for_function("window.director && director.steps.at(-1)[0] === 'ready'", timeout=60_000)
    page.fill("#seconds", "2")
    page.click("#direct")  # the pre-filled default example
    expect(page.locator("#cue")).to_be_visible(timeout=60_000)
    page.screenshot(path=str(shots / "director.png"))
    assert mean_luma(video_picture(page)) > 90
    _check(shots / "director.png")
