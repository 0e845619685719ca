"""Browser fixtures: the real daemon (`sessiond serve --model tiny`, local-only WebRTC on
127.0.0.1) as a subprocess on a free port, and Debian's headless Chromium driven by
Playwright with a fresh profile. All traffic stays on loopback."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--allow-loopback-in-peer-connection", "--use-fake-ui-for-media-stream",
    "--autoplay-policy=no-user-gesture-required",
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests run last: Playwright's sync API keeps its own event loop running in the
    main thread for as long as the session-scoped Chromium lives, and no async test could start
    its own loop there."""
    browser_dir = Path(__file__).resolve().parent
    items.sort(key=lambda item: Path(str(item.path)).resolve().is_relative_to(browser_dir))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return
        time.sleep(0.1)
    log.seek(0)
    raise RuntimeError(f"sessiond did not become ready: {log.read()[-2000:].decode(errors='replace')}")


@pytest.fixture(scope="session")
def daemon_url() -> Iterator[str]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sessiond.cli", "serve", "--model", "tiny", "--device", "cpu",
             "--host", "127.0.0.1", "--port", str(port), "--webrtc-hosts", "127.0.0.1"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            _wait_ready(url, proc, log)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


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
