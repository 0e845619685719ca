"""The pages when their server dies mid-stream (SIGKILL): they say so within seconds instead of
showing a frozen picture as "Playing", and when a server comes back on the same address they get
the session back by themselves (a Redis store kept it) or say the session is gone, with a Retry."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import RedisServer, daemon_process, find_free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium, and daemons killed and restarted


def _playing(page: Page, url: str) -> None:
    page.goto(f"{url}/world.html")
    page.wait_for_function("world.steps.length && world.steps.at(-1)[0] === 'playing'", timeout=60_000)
    page.wait_for_function("world.frameIdx >= 16", timeout=30_000)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def test_a_killed_server_is_noticed_and_a_lost_session_is_said_in_words(page: Page) -> None:
    port = find_free_port()
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "daemon.log"
        with daemon_process("--host", "127.0.0.1", "--webrtc-hosts", "127.0.0.1", port=port, log=log) as (url, proc):
            _playing(page, url)
            _kill(proc)
            # no frames and no answer: the page reconnects (WebRTC alone would notice only when ICE
            # consent fails, many seconds later)
            page.wait_for_function("world.steps.at(-1)[0] === 'reconnecting'", timeout=15_000)
            expect(page.locator("#status")).to_have_text("Lost the connection: reconnecting…")
        # a new server on the same address, with an in-memory store: the session did not survive
        with daemon_process("--host", "127.0.0.1", "--webrtc-hosts", "127.0.0.1", port=port, log=log) as (url, _):
            error = page.locator("#error")
            expect(error.locator("strong")).to_have_text("The session no longer exists", timeout=60_000)
            retry = page.locator("#error-retry")
            expect(retry).to_be_visible()
            before = page.evaluate("world.session.session_id")
            retry.click()
            page.wait_for_function("world.steps.at(-1)[0] === 'playing'", timeout=60_000)
            assert page.evaluate("world.session.session_id") != before


@contextlib.contextmanager
def _restartable(redis: RedisServer) -> Iterator[Callable[[], contextlib.AbstractContextManager[tuple[str, Any]]]]:
    """Starts daemons on one port with one Redis store and one log, one after the other."""
    port = find_free_port()
    args = ("--host", "127.0.0.1", "--webrtc-hosts", "127.0.0.1", "--redis-url", redis.url)
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "daemon.log"
        yield lambda: daemon_process(*args, port=port, log=log)


def test_a_restarted_server_with_the_session_in_redis_gets_it_back_without_a_click(page: Page,
                                                                                  redis_server: RedisServer) -> None:
    with _restartable(redis_server) as daemon:
        with daemon() as (url, proc):
            _playing(page, url)
            session_id = page.evaluate("world.session.session_id")
            last = int(page.evaluate("world.frameIdx"))
            _kill(proc)
            page.wait_for_function("world.steps.at(-1)[0] === 'reconnecting'", timeout=15_000)
        with daemon() as (url, _):
            page.wait_for_function("world.steps.at(-1)[0] === 'playing' && world.reconnects >= 1", timeout=60_000)
            page.wait_for_function(f"world.frameIdx > {last}", timeout=30_000)
            assert page.evaluate("world.session.session_id") == session_id
            expect(page.locator("#error")).to_be_hidden()
            # frames after the restart come after every frame shown before it: time goes on
            shown = page.evaluate("world.frames.at(-1).idx")
            assert shown > last


def test_the_director_page_says_a_lost_connection_and_gets_a_redis_session_back(page: Page,
                                                                               redis_server: RedisServer) -> None:
    with _restartable(redis_server) as daemon:
        with daemon() as (url, proc):
            page.goto(f"{url}/director.html")
            page.wait_for_function("director.steps.length && director.steps.at(-1)[0] === 'ready'", timeout=60_000)
            session_id = page.evaluate("director.session.session_id")
            page.evaluate("director.direct('a meadow', 20)")
            page.wait_for_function("director.fragments > 0", timeout=30_000)
            _kill(proc)
            page.wait_for_function("director.steps.at(-1)[0] === 'reconnecting'", timeout=15_000)
            expect(page.locator("#status")).to_have_text("Lost the connection: reconnecting…")
        with daemon() as (url, _):
            page.wait_for_function("director.reconnects >= 1 && director.steps.at(-1)[0] === 'ready'", timeout=60_000)
            assert page.evaluate("director.session.session_id") == session_id
            expect(page.locator("#error")).to_be_hidden()
            # the reconnect's player replaced the old one, which was closed: one player alive
            assert page.evaluate("director.msePlayers") == 1
