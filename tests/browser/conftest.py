"""Browser fixtures: the real daemon (`sessiond serve`, the tiny model or the demo one, local-only
WebRTC on 127.0.0.1) as a subprocess on a free port, and Debian's headless Chromium driven by
Playwright with a fresh profile. All traffic stays on loopback."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect, sync_playwright

from loadtest.browser_play import CHROMIUM, CHROMIUM_ARGS
from tests.conftest import daemon_process

# A 2-core machine running a daemon, Chromium and the test at once answers slower than a desk
# machine: a page state gets 15 s to appear (the library's default is 5 s).
expect.set_options(timeout=15_000)

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests run last: Playwright's sync API keeps its own event loop running in the
    main thread for as long as the session-scoped Chromium lives, and no async test could start
    its own loop there."""
    browser_dir = Path(__file__).resolve().parent
    items.sort(key=lambda item: Path(str(item.path)).resolve().is_relative_to(browser_dir))


@dataclass(frozen=True)
class Served:
    url: str
    log: Path  # the daemon's whole output


@contextlib.contextmanager
def serve(model: str, *args: str) -> Iterator[Served]:
    """`sessiond serve --model MODEL ARGS...` (local-only WebRTC) on a free loopback port until the block ends."""
    with tempfile.TemporaryDirectory(prefix="sessiond-browser-") as folder:
        log = Path(folder) / "daemon.log"
        with daemon_process("--model", model, "--host", "127.0.0.1", "--webrtc-hosts", "127.0.0.1", *args,
                            log=log) as (url, _):
            yield Served(url, log)


@pytest.fixture(scope="session")
def tiny_daemon() -> Iterator[Served]:
    with serve("tiny") as served:
        yield served


@pytest.fixture(scope="session")
def daemon_url(tiny_daemon: Served) -> str:
    return tiny_daemon.url


@pytest.fixture(scope="session")
def demo_daemon() -> Iterator[Served]:
    """The embedded default model (what `bash scripts/serve.sh` serves): its example prompts and
    frames are what a newcomer sees. On this CPU it streams 10-17 frames/s, enough for short takes;
    the default duty admission refuses a demo director here when the shared box is loaded (the
    honest answer, tested elsewhere), so these page tests run the KV-pool policy explicitly."""
    with serve("demo", "--policy", "kv") as served:
        yield served


@pytest.fixture(scope="session")
def chromium() -> Iterator[BrowserContext]:
    with tempfile.TemporaryDirectory(prefix="sessiond-chromium-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1100, "height": 700},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(chromium: BrowserContext) -> Iterator[Page]:
    page = chromium.new_page()
    try:
        yield page
    finally:
        page.close()
