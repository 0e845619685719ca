"""Play the World page in Chromium for a while with scripted keys and print what a player gets:
``python -m loadtest.browser_play [--seconds 60] [--url URL] [--model demo] [--screenshots DIR]
[-- SERVE ARGS...]``.

Without ``--url`` it starts ``sessiond serve --model MODEL`` on a free loopback port with the
daemon's defaults (what ``bash scripts/serve.sh`` runs; WebRTC restricted to 127.0.0.1) and stops
it after. Headless Chromium (/usr/bin/chromium) opens /world.html, waits for the first frames,
then holds keys in a fixed cycle (every direction, diagonals, runs, brakes, rests). Printed (and
written as JSON with ``--json``): decoded frames per second over the whole run (the WebRTC
decoder's own count), the page's per-half-second fps readings, and action-to-photon p50 / p95 /
max in ms -- for every displayed frame carrying a new action, the time from sending that action
to the frame's expected display (the page's ``world.a2p``, every sample of the run collected) --
and, to see whether latency stays flat, its p95 in the first and the last minute and their ratio,
and the jitter buffer's delay as the page reads it every half second (``world.jitterMs``, over
the last stats interval): p50, largest, largest in the first and in the last minute; and how often
the page's playout bound gave the video a fresh receiver (``resyncs``, web/playout.js).
With ``--screenshots DIR`` the page is also saved as DIR/play_SSSs.png when play starts and every
``--screenshot-every`` seconds (default 20) after, to look at what the player saw. Shots disturb
the numbers: each stalls headless Chromium's compositor, and the WebRTC jitter buffer grows after
a stall (on the 2-core AMD box, 180 s with 6 shots: action-to-photon p50 497 ms; without: 264 ms):
take numbers from a run without them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from loadtest._process import stop_process

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "KEY_CYCLE", "chromium", "main", "play"]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--allow-loopback-in-peer-connection", "--use-fake-ui-for-media-stream",
    "--autoplay-policy=no-user-gesture-required",
]
# (keys held, seconds): every direction, diagonals, a run, a brake and a rest; repeated to fill the run
KEY_CYCLE: tuple[tuple[tuple[str, ...], float], ...] = (
    (("KeyW",), 3.0), (("KeyD",), 3.0), (("KeyS",), 3.0), (("KeyA",), 3.0),
    (("ArrowUp", "ArrowRight"), 2.5), (("ArrowDown", "ArrowLeft"), 2.5), (("Space",), 1.0), ((), 1.5),
    (("ShiftLeft", "ArrowRight"), 2.5), (("ArrowUp",), 2.0), (("ArrowLeft",), 2.0), (("ArrowDown",), 2.0),
)
# every frame the page decoded, on the receivers a resync replaced too (world.framesDecoded counts
# the playing one's)
DECODED_IN_ALL = "world.framesDecoded + world.framesDecodedBefore"
# collects every action-to-photon sample with the time it was taken (performance.now() ms): the
# page keeps only its last 64 in world.a2p
COLLECT_A2P = """
Object.defineProperty(window, "world", { configurable: true, set(value) {
  window.a2pAll = [];
  window.a2pAt = [];
  const push = value.a2p.push.bind(value.a2p);
  value.a2p.push = (...xs) => {
    window.a2pAll.push(...xs);
    for (const _ of xs) window.a2pAt.push(performance.now());
    return push(...xs);
  };
  Object.defineProperty(window, "world", { value, writable: true, configurable: true });
} });
"""


@contextlib.contextmanager
def chromium(profile_prefix: str, width: int, height: int) -> Iterator[Any]:
    """Headless Chromium (`CHROMIUM`, `CHROMIUM_ARGS`) on a fresh profile with a viewport of
    `width` x `height`: its browser context (Playwright's), closed when the block ends."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix=profile_prefix) as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                        args=CHROMIUM_ARGS, viewport={"width": width, "height": height})
        try:
            yield context
        finally:
            context.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(model: str, extra: list[str], log: Path) -> Iterator[str]:
    """``sessiond serve`` as a subprocess on a free port until the block ends; its output goes to ``log``."""
    port = _free_port()
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "sessiond.cli", "serve", "--model", model, "--port", str(port),
                                 "--host", "127.0.0.1", "--webrtc-hosts", "127.0.0.1", *extra],
                                stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 180.0
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                        break
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the daemon did not become ready at {url}; see {log}")
                time.sleep(0.2)
            yield url
        finally:
            stop_process(proc)


def _percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _describe(error: object) -> str:
    """A page error as the page recorded it (a string, or the server's {code, message})."""
    if isinstance(error, dict):
        return f"{error.get('code', 'error')}: {error.get('message', '')}"
    return str(error)


def _minutes(a2p: list[float], a2p_at: list[float], jitter: list[tuple[float, float]], elapsed: float
             ) -> dict[str, object]:
    """Action-to-photon p95 and the jitter buffer in the first and the last minute of play (the
    whole run when shorter than two minutes), and the jitter buffer's largest reading: does
    latency stay flat over a long play?"""
    span = min(60.0, elapsed / 2)
    first = [v for v, t in zip(a2p, a2p_at, strict=False) if 0 <= t < span]
    last = [v for v, t in zip(a2p, a2p_at, strict=False) if t >= elapsed - span]
    p95_first, p95_last = _percentile(first, 95), _percentile(last, 95)
    return {
        "window_s": span,
        "a2p_ms_p95_first": p95_first,
        "a2p_ms_p95_last": p95_last,
        "a2p_p95_last_over_first": p95_last / p95_first if p95_first and p95_last is not None else None,
        "jitter_buffer_ms_p50": _percentile([j for _, j in jitter], 50),
        "jitter_buffer_ms_max": max((j for _, j in jitter), default=None),
        "jitter_buffer_ms_max_first": max((j for t, j in jitter if t < span), default=None),
        "jitter_buffer_ms_max_last": max((j for t, j in jitter if t >= elapsed - span), default=None),
    }


class PageFailed(Exception):
    """The World page reported an error before it played (e.g. the daemon refused the session)."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def play(url: str, seconds: float, shots: Path | None = None, shot_every_s: float = 20.0) -> dict[str, object]:
    """Open the World page at ``url``, hold the key cycle for ``seconds``, return the numbers; with
    ``shots`` a screenshot of the page there at the start and every ``shot_every_s`` seconds."""
    with chromium("browser-play-", 1100, 700) as context:
        page = context.new_page()
        page.add_init_script(COLLECT_A2P)
        opened = time.monotonic()
        page.goto(f"{url}/world.html")
        page.wait_for_function("window.world && (world.framesDecoded >= 8 || world.errors.length > 0)",
                               timeout=90_000)
        if int(page.evaluate("world.framesDecoded")) < 8:
            raise PageFailed([_describe(e) for e in page.evaluate("world.errors")])
        first_frames_s = time.monotonic() - opened
        page.locator("body").click(position={"x": 5, "y": 5})
        start_frames, started = page.evaluate(DECODED_IN_ALL), time.monotonic()
        fps_readings: list[float] = []
        jitter_readings: list[tuple[float, float]] = []  # (seconds into play, the page's jitter buffer ms)
        play_t0_ms = float(page.evaluate("performance.now()"))
        taken: list[str] = []
        next_shot = 0.0
        if shots is not None:
            shots.mkdir(parents=True, exist_ok=True)
        index = 0
        while time.monotonic() - started < seconds:
            keys, hold = KEY_CYCLE[index % len(KEY_CYCLE)]
            index += 1
            for key in keys:
                page.keyboard.down(key)
            end = min(time.monotonic() + hold, started + seconds)
            while time.monotonic() < end:
                if shots is not None and time.monotonic() - started >= next_shot:
                    path = shots / f"play_{int(next_shot):03d}s.png"
                    page.screenshot(path=str(path))
                    taken.append(path.name)
                    next_shot += shot_every_s
                page.wait_for_timeout(500)
                fps, jitter = page.evaluate("[world.fps, world.jitterMs]")
                fps_readings.append(float(fps))
                if jitter is not None:
                    jitter_readings.append((time.monotonic() - started, float(jitter)))
            for key in reversed(keys):
                page.keyboard.up(key)
        elapsed = time.monotonic() - started
        decoded = int(page.evaluate(DECODED_IN_ALL)) - int(start_frames)
        a2p = [float(v) for v in page.evaluate("window.a2pAll || []")]
        a2p_at = [(float(t) - play_t0_ms) / 1000.0 for t in page.evaluate("window.a2pAt || []")]
        errors = page.evaluate("world.errors")
        resyncs = int(page.evaluate("world.resyncs || 0"))
    return {
        "url": url,
        "seconds": round(elapsed, 1),
        "first_frames_after_s": round(first_frames_s, 2),
        "decoded_frames": decoded,
        "decoded_fps": decoded / elapsed,
        "page_fps_p50": _percentile(fps_readings[2:], 50),  # the first readings straddle the key press
        "page_fps_min": min(fps_readings[2:], default=None),
        "a2p_samples": len(a2p),
        "a2p_ms_p50": _percentile(a2p, 50),
        "a2p_ms_p95": _percentile(a2p, 95),
        "a2p_ms_max": max(a2p, default=None),
        **_minutes(a2p, a2p_at, jitter_readings, elapsed),
        "resyncs": resyncs,  # fresh video receivers the page asked for (its playout bound, web/playout.js)
        "errors": errors,
        "screenshots": taken,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.browser_play", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="how long to play (default 60)")
    p.add_argument("--url", default=None, help="a running daemon; default: start `sessiond serve` for the run")
    p.add_argument("--model", default="demo", help="the model the started daemon serves (default demo)")
    p.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    p.add_argument("--screenshots", type=Path, default=None, help="save the page here as it plays (PNG)")
    p.add_argument("--screenshot-every", type=float, default=20.0, help="seconds between screenshots (default 20)")
    p.add_argument("serve_args", nargs="*", help="more `sessiond serve` arguments (after --)")
    args = p.parse_args(argv)
    if args.seconds <= 0 or args.screenshot_every <= 0:
        print("error: --seconds and --screenshot-every must be positive", file=sys.stderr)
        return 2
    try:
        if args.url is not None:
            report = play(args.url, args.seconds, args.screenshots, args.screenshot_every)
        else:
            with tempfile.TemporaryDirectory(prefix="browser-play-daemon-") as folder, \
                    serve(args.model, args.serve_args, Path(folder) / "daemon.log") as url:
                report = play(url, args.seconds, args.screenshots, args.screenshot_every)
    except PageFailed as exc:
        print(f"error: the World page did not play: {exc}. If the daemon refused the session for capacity, "
              "it cannot serve one world session within objective on this machine; to measure anyway, let it "
              "admit by memory alone: python -m loadtest.browser_play ... -- --policy kv", file=sys.stderr)
        return 3
    report["model"] = args.model if args.url is None else None
    report["serve_args"] = args.serve_args
    report["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    text = json.dumps(report, indent=2)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
