"""The pages and the session's life: leaving a page deletes its session at once (pagehide + a
keepalive DELETE; its token then finds nothing, 404, well before any idle timeout), and a server
that needs an API key gets one pasted by the user."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page

from sessiond.api_keys import add_key
from tests.browser.conftest import serve

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _gone_after(daemon_url: str, session: dict[str, str], since: float, limit_s: float) -> float:
    url = f"{daemon_url}/v1/sessions/{session['session_id']}"
    headers = {"Authorization": f"Bearer {session['token']}"}
    while True:
        status = httpx.get(url, headers=headers, timeout=5).status_code
        if status == 404:
            return time.monotonic() - since
        assert status == 200
        assert time.monotonic() - since < limit_s, f"the session still exists {limit_s} s after the page went"
        time.sleep(0.05)


@pytest.mark.parametrize(("page_name", "ready"), [
    ("world", "window.world && window.world.framesDecoded >= 1"),
    ("director", "window.director && window.director.codec !== null"),
])
def test_leaving_the_page_deletes_its_session(page: Page, daemon_url: str, page_name: str, ready: str) -> None:
    page.goto(f"{daemon_url}/{page_name}.html")
    page.wait_for_function(ready, timeout=45_000)
    session = page.evaluate(f"({{session_id: {page_name}.session.session_id, token: {page_name}.session.token}})")
    assert httpx.get(f"{daemon_url}/v1/sessions/{session['session_id']}",
                     headers={"Authorization": f"Bearer {session['token']}"}, timeout=5).status_code == 200
    since = time.monotonic()
    page.goto("about:blank")
    latency = _gone_after(daemon_url, session, since, 2.0)
    print(f"\n{page_name} page: session gone {latency:.3f} s after navigating away")


def test_a_server_that_needs_an_api_key_gets_one_pasted_on_the_page(page: Page, tmp_path: Path) -> None:
    """The page asks for the key (a wrong one is asked again), keeps it for the tab, and plays."""
    keys = tmp_path / "keys.jsonl"
    key = add_key(keys, "browser", 1)
    with serve("tiny", "--api-keys", str(keys)) as served:
        page.goto(f"{served.url}/world.html")
        page.wait_for_selector("#api-key-input", timeout=45_000)
        page.fill("#api-key-input", "sk_not_this_one")
        page.click("#api-key button")
        page.wait_for_function("document.querySelector('#api-key p')?.textContent.includes('not a key')",
                               timeout=10_000)
        page.fill("#api-key-input", key)
        page.click("#api-key button")
        page.wait_for_function("window.world && window.world.framesDecoded >= 1", timeout=45_000)
        assert page.evaluate("sessionStorage.getItem('sessiond.apiKey')") == key
        assert page.locator("#api-key").count() == 0
