"""`python -m loadtest.spectators_chromium`: spectators in headless Chromium, for the spectator
benchmark (`loadtest.spectators --chromium N`): N tabs of the spectator page (`watch.html` with a
share link's token) in one browser process; each reports the time from opening the page (its
navigation start) to its first frame shown (`watch.firstFrameMs`, the page's
requestVideoFrameCallback), the marks on the way (`watch.marks`: the script connecting, the session
located, connected, the track arrived) and its decoded frames/s over the measured window (the video element's
`getVideoPlaybackQuality().totalVideoFrames`, as `window.watch.framesDecoded` reads it). Prints
one JSON line in the shape of the WebSocket spectator workers' report."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from loadtest._barrier import wait_for_go
from loadtest.browser_play import chromium

__all__ = ["main", "watch_pages"]


def watch_pages(watch_url: str, pages: int, warm_s: float, seconds: float,
                ready: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """`ready` (if given) is called once the browser and its blank tabs are up, before any page opens."""
    from playwright.sync_api import Error as PlaywrightError

    outs: list[dict[str, Any]] = [{"media": "chromium"} for _ in range(pages)]
    with chromium("spectators-", 800, 600) as context:
        try:
            blank = [context.new_page() for _ in range(pages)]
            if ready is not None:
                ready()
            for page in blank:
                page.goto(watch_url)
            start = time.monotonic() + warm_s
            while time.monotonic() < start:  # first frames: the page's own mark, from its navigation start
                for page, out in zip(blank, outs, strict=True):
                    if "first_frame_s" not in out:
                        shown = page.evaluate("window.watch ? watch.firstFrameMs : null")
                        if shown is not None:
                            out["first_frame_s"] = round(float(shown) / 1000.0, 3)
                            marks = page.evaluate("watch.marks")  # the way there (web/watch.js)
                            out["marks_s"] = {k: round(float(v) / 1000.0, 3) for k, v in marks.items()}
                time.sleep(0.05)
            before = [int(p.evaluate("watch.framesDecoded")) for p in blank]
            t0 = time.monotonic()
            time.sleep(seconds)
            after = [int(p.evaluate("watch.framesDecoded")) for p in blank]
            elapsed = time.monotonic() - t0
            for out, b, a, page in zip(outs, before, after, blank, strict=True):
                out.update(frames=a, fps=(a - b) / elapsed, transport=page.evaluate("watch.transport"))
                if "first_frame_s" not in out:
                    out["error"] = "no frame decoded within the warm-up"
        except PlaywrightError as exc:
            for out in outs:
                out.setdefault("error", str(exc)[:200])
    return outs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m loadtest.spectators_chromium", description=__doc__.split("\n\n")[0])
    ap.add_argument("--watch-url", required=True)
    ap.add_argument("--pages", type=int, default=2)
    ap.add_argument("--warm-s", type=float, default=3.0)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--wait-for-go", action="store_true",
                    help="say `ready` on stdout once the browser is up, open the pages on a line on stdin")
    args = ap.parse_args(argv)
    cpu0 = time.process_time()
    outs = watch_pages(args.watch_url, args.pages, args.warm_s, args.seconds,
                       wait_for_go if args.wait_for_go else None)
    print(json.dumps({"spectators": outs, "cpu_s": time.process_time() - cpu0}), flush=True)


if __name__ == "__main__":
    main()
