"""The index page says, before any click, what this start serves (issue 26, item 2): the
statement of `/v1/capacity`, and on a mode's card why this start cannot serve it."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import serve

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium takes seconds to start


def test_the_index_page_states_what_this_start_serves(page: Page, daemon_url: str) -> None:
    cap = httpx.get(f"{daemon_url}/v1/capacity").json()
    page.goto(f"{daemon_url}/")
    expect(page.locator("#verdict")).to_have_text(cap["statement"])
    assert cap["statement"].startswith("This start serves World for ")
    expect(page.locator(".cannot")).to_have_count(0)


def test_a_mode_this_start_cannot_serve_is_marked_on_its_card_with_the_flag_to_look_anyway(page: Page) -> None:
    with serve("tiny", "--objective-world-a2p-p95-ms", "50") as served:
        cap = httpx.get(f"{served.url}/v1/capacity").json()
        page.goto(f"{served.url}/")
        expect(page.locator("#verdict")).to_have_text(cap["statement"])
        expect(page.locator("#world-link .cannot")).to_have_text(f"Not on this start: {cap['cannot']['world']}.")
        expect(page.locator("#director-link .cannot")).to_have_count(0)
    assert "to look anyway, start it with --policy kv." in cap["statement"]
