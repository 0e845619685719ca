"""Co-play as players meet it: the World page in headless Chromium, the owner and its invited
players each in a tab, all holding keys: ``python -m loadtest.coplay_chromium [--players 4]
[--seconds 60] [--url URL] [--json out.json] [-- SERVE ARGS...]``.

Without ``--url`` it starts ``sessiond serve`` (the defaults, WebRTC on 127.0.0.1) for the run. The
owner's tab opens /world.html (it creates the world), presses the page's Invite button once per
co-player and opens each invite link in a tab of its own (the page joins over WebRTC as player k).
Then every tab holds a step of the browser play's key cycle at the same time, each tab starting
at another step of it, 1.5 s a step. Per player: its own action-to-photon (the page's ``world.a2p``
samples: from sending an action to the expected display of the first frame that applied it, matched
by the player's own ``action_seq``), decoded frames/s, its transport and any page error. The same
numbers as ``loadtest.coplay`` measures for aiortc peers and raw WebSockets, but where a browser's
jitter buffer, decoder and compositor decide them.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loadtest.browser_play import COLLECT_A2P, KEY_CYCLE, PageFailed, chromium, serve
from loadtest.browser_play import _describe as describe
from loadtest.browser_play import _percentile as percentile

__all__ = ["coplay", "main"]

_STEP_S = 1.5  # each key-cycle step held this long, by every tab at once
_READY = "window.world && (world.framesDecoded >= 8 || world.errors.length > 0)"


def _joined(page: Any, player: int | None) -> None:
    page.wait_for_function(_READY, timeout=90_000)
    if int(page.evaluate("world.framesDecoded")) < 8:
        raise PageFailed([describe(e) for e in page.evaluate("world.errors")])
    if player is not None and page.evaluate("world.player") != player:
        raise PageFailed([f"the invite tab is player {page.evaluate('world.player')}, not {player}"])


def coplay(url: str, players: int, seconds: float) -> dict[str, Any]:
    """Open the owner's World page at ``url`` and ``players - 1`` invite tabs, play ``seconds``."""
    with chromium("coplay-chromium-", 1100, 700) as context:
        owner = context.new_page()
        owner.add_init_script(COLLECT_A2P)
        owner.goto(f"{url}/world.html")
        _joined(owner, None)
        pages = [owner]
        for k in range(1, players):
            owner.click("#invite")
            owner.wait_for_function(f"(world.links || []).length >= {k}", timeout=30_000)
            link = owner.evaluate("world.links.at(-1)")
            tab = context.new_page()
            tab.add_init_script(COLLECT_A2P)
            tab.goto(link["url"])
            _joined(tab, int(link["player"]))
            pages.append(tab)
        for page in pages:
            page.locator("body").click(position={"x": 5, "y": 5})
        before = [int(p.evaluate("world.framesDecoded")) for p in pages]
        started, step = time.monotonic(), 0
        while time.monotonic() - started < seconds:
            held = []
            for i, page in enumerate(pages):
                keys = KEY_CYCLE[(step + 3 * i) % len(KEY_CYCLE)][0]
                for key in keys:
                    page.keyboard.down(key)
                held.append((page, keys))
            owner.wait_for_timeout(_STEP_S * 1000)
            for page, keys in held:
                for key in reversed(keys):
                    page.keyboard.up(key)
            step += 1
        elapsed = time.monotonic() - started
        rows = []
        for i, page in enumerate(pages):
            a2p = [float(v) for v in page.evaluate("window.a2pAll || []")]
            decoded = int(page.evaluate("world.framesDecoded")) - before[i]
            rows.append({"player": i, "transport": page.evaluate("world.transport"),
                         "a2p_samples": len(a2p), "a2p_ms_p50": percentile(a2p, 50),
                         "a2p_ms_p95": percentile(a2p, 95), "decoded_fps": decoded / elapsed,
                         "errors": [describe(e) for e in page.evaluate("world.errors")]})
    p50s = [r["a2p_ms_p50"] for r in rows if r["a2p_ms_p50"] is not None]
    return {"url": url, "players": players, "seconds": round(elapsed, 1), "rows": rows,
            "worst_a2p_ms_p50": max(p50s) if len(p50s) == players else None}


def markdown(report: dict[str, Any], command: str) -> str:
    lines = [f"# Co-play in Chromium: {report['players']} players of one world", "",
             f"`{command}`, {report['seconds']} s of play.", "",
             "| player | transport | a2p p50 (ms) | a2p p95 (ms) | samples | decoded frames/s | errors |",
             "|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        p50 = "–" if r["a2p_ms_p50"] is None else f"{r['a2p_ms_p50']:.1f}"
        p95 = "–" if r["a2p_ms_p95"] is None else f"{r['a2p_ms_p95']:.1f}"
        lines.append(f"| {r['player']}{' (owner)' if r['player'] == 0 else ''} | {r['transport']} | {p50} | {p95} "
                     f"| {r['a2p_samples']} | {r['decoded_fps']:.2f} | {len(r['errors'])} |")
    worst = report["worst_a2p_ms_p50"]
    lines += ["", f"Worst player's p50: {'–' if worst is None else f'{worst:.1f} ms'} (issue 31: <= 350 ms)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.coplay_chromium", description=__doc__.split("\n\n")[0])
    p.add_argument("--players", type=int, default=4, help="the owner and its co-players, 2..4 (default 4)")
    p.add_argument("--seconds", type=float, default=60.0, help="how long to play (default 60)")
    p.add_argument("--url", default=None, help="a running daemon; default: start `sessiond serve` for the run")
    p.add_argument("--model", default="demo", help="the model the started daemon serves (default demo)")
    p.add_argument("--json", type=Path, default=None, help="also write the numbers here (and a .md beside)")
    p.add_argument("serve_args", nargs="*", help="more `sessiond serve` arguments (after --)")
    args = p.parse_args(argv)
    if not 2 <= args.players <= 4 or args.seconds <= 0:
        print("error: --players must be 2..4 (a world made by the page has 4 seats) and --seconds positive",
              file=sys.stderr)
        return 2
    command = "python -m loadtest.coplay_chromium " + " ".join(argv if argv is not None else sys.argv[1:])
    try:
        if args.url is not None:
            report = coplay(args.url, args.players, args.seconds)
        else:
            with tempfile.TemporaryDirectory(prefix="coplay-chromium-daemon-") as folder, \
                    serve(args.model, args.serve_args, Path(folder) / "daemon.log") as url:
                report = coplay(url, args.players, args.seconds)
    except PageFailed as exc:
        print(f"error: the page failed: {exc}", file=sys.stderr)
        return 1
    report["command"] = command
    text = markdown(report, command)
    print(text)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
        args.json.with_suffix(".md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
