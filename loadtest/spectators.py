"""`python -m loadtest.spectators`: what spectators cost one world session and its owner.

A real `sessiond serve` in its own process (`loadtest.replay.daemon_process.served`); one world
session whose owner plays (an action every `1/action_hz` s over a raw WebSocket; action-to-photon:
action sent -> first frame whose `action_seq` >= its seq, as the replay meter measures it); then,
level by level (0, 10, 25, 50, 0 spectators by default; repeat counts, e.g. `--levels
0,50,0,50,0,50,0`, and their samples pool, so the box's drift falls on both alike), spectators on a share link, run by separate
client PROCESSES (a few processes, each holding its share of the spectators as WebSocket clients;
a mix of raw and fMP4; a process per aiortc WebRTC peer; one Chromium with tabs of the spectator
page). A level's client processes get ready first (imports, the browser launched) and then connect
all at once (`loadtest._barrier`), as a burst of users on their own machines would. Each spectator
reports frames/s over the measured window, its first frame's latency after its connect began, and
bytes. Per level: the owner's a2p p50/p95 and
frames/s, the daemon's CPU (from /proc of its pid) and RSS, so CPU and memory per additional
spectator. JSON, markdown and a PNG in `--out` (results/spectators/).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from fleet.local import cpu_seconds, provenance
from loadtest._barrier import release, wait_for_go
from loadtest.replay.daemon_process import DaemonSpec, served
from loadtest.replay.percentiles import percentile
from protocols.client import SessionClient
from protocols.codec import decode, encode
from protocols.messages import Action, Frame, Hello, Media, Welcome

__all__ = ["main"]

_DECODE_MAX = 1 << 24


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


# ---- a spectator worker process ----------------------------------------------------------------
async def _spectate(ws_url: str, token: str, media: str, start: float, stop: float, out: dict[str, Any]) -> None:
    from websockets.asyncio.client import connect

    began = time.monotonic()
    frames = 0
    counted = 0
    bytes_in = 0
    try:
        async with connect(f"{ws_url}?media={media}", additional_headers={"Authorization": f"Bearer {token}"},
                           compression=None, max_size=_DECODE_MAX, proxy=None, close_timeout=1) as ws:
            await ws.send(encode(Hello(v=1)))
            welcome = decode(await ws.recv(decode=False), max_bytes=_DECODE_MAX, expect="server")
            if not isinstance(welcome, Welcome):
                out["error"] = getattr(welcome, "code", type(welcome).__name__)
                return
            out["welcome_s"] = time.monotonic() - began  # the first frame's latency splits at the welcome
            while time.monotonic() < stop:
                try:
                    data = await asyncio.wait_for(ws.recv(decode=False), max(0.01, stop - time.monotonic()))
                except TimeoutError:
                    break
                bytes_in += len(data)
                msg = decode(data, max_bytes=_DECODE_MAX, expect="server")
                n = 1 if isinstance(msg, Frame) else msg.n if isinstance(msg, Media) else 0
                if n and "first_frame_s" not in out:
                    out["first_frame_s"] = time.monotonic() - began
                frames += n
                if n and time.monotonic() >= start:
                    counted += n
    except (OSError, ValueError) as exc:
        out["error"] = repr(exc)[:200]
    except Exception as exc:  # a closed connection: reported, not fatal to the worker
        out["error"] = repr(exc)[:200]
    out.update(media=media, frames=frames, bytes=bytes_in,
               fps=counted / max(1e-6, stop - start))


async def _worker(args: argparse.Namespace) -> None:
    """WebSocket spectators (raw, fMP4) of one client process, or one WebRTC spectator (`--rtc`)."""
    now = time.monotonic()
    if args.rtc:
        from transports.webrtc.watch import watch

        cpu0 = time.process_time()
        report = await watch(args.webrtc_url, args.token, now + args.warm_s, now + args.warm_s + args.seconds)
        print(json.dumps({"spectators": [report], "cpu_s": time.process_time() - cpu0}), flush=True)
        return
    start = now + args.warm_s
    stop = start + args.seconds
    medias = args.medias.split(",")
    outs: list[dict[str, Any]] = [{} for _ in medias]
    cpu0 = time.process_time()
    await asyncio.gather(*(_spectate(args.ws_url, args.token, m, start, stop, o) for m, o in zip(medias, outs,
                                                                                                strict=True)))
    print(json.dumps({"spectators": outs, "cpu_s": time.process_time() - cpu0}), flush=True)


# ---- the owner ---------------------------------------------------------------------------------
class Owner:
    """The playing owner. Its actions leave at jittered times (uniform between 0.5 and 1.5 mean
    intervals, seeded): at a fixed rate near the chunk rate (4 per s against 4 chunks per s) every
    action lands at the same phase of a chunk for a whole level, and the level's p50 then measures
    that phase, not the load (seen: 179 to 304 ms between levels of one run)."""

    def __init__(self, client: SessionClient, action_hz: float, seed: int = 0) -> None:
        self.client = client
        self.action_hz = action_hz
        self.rng = random.Random(seed)
        self.sent: dict[int, float] = {}
        self.a2p_ms: list[tuple[float, float]] = []  # (when, ms)
        self.frames: list[float] = []
        self._pending: list[int] = []

    async def read(self) -> None:
        async for msg in self.client.messages():
            if isinstance(msg, Frame):
                now = time.monotonic()
                self.frames.append(now)
                while self._pending and self._pending[0] <= msg.action_seq:
                    seq = self._pending.pop(0)
                    self.a2p_ms.append((now, (now - self.sent.pop(seq)) * 1000.0))

    async def act(self) -> None:
        keys = (("w",), ("a",), ("s",), ("d",))
        i = 0
        while True:
            seq = self.client.next_id()
            self.sent[seq] = time.monotonic()
            self._pending.append(seq)
            await self.client.send(Action(seq=seq, ts=self.client.now_ms(), keys=keys[i % 4]))
            i += 1
            await asyncio.sleep(self.rng.uniform(0.5, 1.5) / self.action_hz)


async def _level(url: str, owner: Owner, urls: tuple[str, str, str], token: str, pid: int, n: int,
                 args: argparse.Namespace) -> dict[str, Any]:
    ws_url, webrtc_url, watch_url = urls
    procs = max(1, min(args.processes, n))
    rtc = min(args.webrtc, n)
    tabs = min(args.chromium, n - rtc)
    medias = ["fmp4" if (i % 10) < round(10 * args.fmp4_share) else "raw" for i in range(n - rtc - tabs)]
    groups = [medias[i::procs] for i in range(procs)] if n - rtc else []
    cmd = [sys.executable, "-m", "loadtest.spectators", "--worker", "--ws-url", ws_url, f"--token={token}",
           "--seconds", str(args.seconds), "--warm-s", str(args.warm_s)]
    started = time.monotonic()

    def spawn(argv: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    workers = [spawn([*cmd, "--medias", ",".join(g)]) for g in groups if g]
    # WebRTC spectators: the transports layer's own watcher (aiortc, loopback only), one process each
    workers += [spawn([*cmd, "--rtc", "--webrtc-url", webrtc_url]) for _ in range(rtc)]
    if tabs:  # the spectator page in headless Chromium: one browser process, `tabs` pages
        workers.append(spawn([sys.executable, "-m", "loadtest.spectators_chromium", "--watch-url", watch_url,
                              "--pages", str(tabs), "--seconds", str(args.seconds), "--warm-s", str(args.warm_s),
                              "--wait-for-go"]))
    await release(workers)  # every client process ready (imported, browser up), then all connect at once
    await asyncio.sleep(args.warm_s)
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    window = (t0, t0 + args.seconds)
    await asyncio.sleep(args.seconds)
    cpu1, t1 = cpu_seconds(pid), time.monotonic()
    rss = _rss_mib(pid)
    async with httpx.AsyncClient(timeout=10.0) as http:
        seen = (await http.get(f"{url}/v1/capacity")).json().get("spectators", {})
    spectators: list[dict[str, Any]] = []
    client_cpu_s = 0.0
    for w in workers:
        out, _ = await asyncio.to_thread(w.communicate, None, 60)
        with contextlib.suppress(ValueError, IndexError):
            report = json.loads(out.decode().strip().splitlines()[-1])
            spectators += report["spectators"]
            client_cpu_s += report["cpu_s"]
    a2p = [ms for at, ms in owner.a2p_ms if window[0] <= at <= window[1]]
    owner_fps = sum(1 for at in owner.frames if window[0] <= at <= window[1]) / (t1 - t0)
    ok = [s for s in spectators if "error" not in s]
    fps = [s["fps"] for s in ok]
    rtc_fps = [s["fps"] for s in ok if s.get("media") == "webrtc"]
    tab_fps = [s["fps"] for s in ok if s.get("media") == "chromium"]
    ws_bytes = [s["bytes"] for s in ok if s.get("media") not in ("webrtc", "chromium")]
    first = [s["first_frame_s"] for s in ok if "first_frame_s" in s]
    return {
        "spectators": n, "spectators_ok": len(ok), "errors": [s["error"] for s in spectators if "error" in s][:5],
        "owner_a2p_ms_p50": _ms(percentile(a2p, 50)), "owner_a2p_ms_p95": _ms(percentile(a2p, 95)),
        "owner_a2p_samples": len(a2p), "owner_a2p_ms": [round(ms, 1) for ms in a2p], "owner_fps": round(owner_fps, 2),
        "spectator_fps_min": round(min(fps), 2) if fps else None,
        "spectator_fps_median": round(statistics.median(fps), 2) if fps else None,
        "spectators_at_15fps": sum(1 for f in fps if f >= 15.0),
        "webrtc_spectators": rtc, "webrtc_fps_min": round(min(rtc_fps), 2) if rtc_fps else None,
        "chromium_spectators": tabs, "chromium_fps_min": round(min(tab_fps), 2) if tab_fps else None,
        "first_frame_s_max": round(max(first), 3) if first else None,
        "first_frame_s_median": round(statistics.median(first), 3) if first else None,
        # by media (raw, fmp4: WebSocket clients; webrtc: aiortc; chromium: from opening the page)
        "first_frame_s_max_by_media": {m: round(max(f), 3) for m, f in _by_media(ok, "first_frame_s").items()},
        # Chromium tabs from the moment the page's script began to connect (its load before that excluded)
        "chromium_after_connecting_s_max": round(max(after), 3) if (after := [
            s["first_frame_s"] - s["marks_s"]["connecting"] for s in ok
            if s.get("media") == "chromium" and "connecting" in s.get("marks_s", {})]) else None,
        # Chromium tabs: the page's marks on the way to the first frame (web/watch.js), each the slowest tab's
        "chromium_marks_s_max": _marks_max([s["marks_s"] for s in ok if s.get("media") == "chromium" and "marks_s" in s]),
        # aiortc peers: their marks (transports/webrtc/watch.py, s after the offer began), each the slowest peer's
        "webrtc_marks_s_max": _marks_max([s["marks_s"] for s in ok if s.get("media") == "webrtc" and "marks_s" in s]),
        # WebSocket spectators: connect -> welcome (the handshake and admission), the rest is the wait for a frame
        "welcome_s_max": round(max(welcomes), 3) if (welcomes := [s["welcome_s"] for s in ok if "welcome_s" in s])
        else None,
        "bytes_per_spectator_per_s": round(statistics.median(ws_bytes) / (args.seconds + args.warm_s))
        if ws_bytes else None,  # WebSocket spectators
        "daemon_cpu_cores": round((cpu1 - cpu0) / (t1 - t0), 4), "daemon_rss_mib": round(rss, 1),
        "shared_pack_cores": seen.get("shared_cores"), "daemon_counts_spectators": seen.get("spectators"),
        "client_processes": len(workers),  # on the same box: their CPU is the measurement's own load
        "client_cpu_cores": round(client_cpu_s / (args.seconds + args.warm_s), 3),
        "wall_s": round(time.monotonic() - started, 1),
    }


def _marks_max(marks: list[dict[str, float]]) -> dict[str, float]:
    """Per mark the latest of the clients' (s since each one's own start)."""
    out: dict[str, float] = {}
    for tab in marks:
        for name, at in tab.items():
            out[name] = max(out.get(name, 0.0), at)
    return out


def _by_media(spectators: list[dict[str, Any]], key: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for s in spectators:
        if key in s:
            out.setdefault(str(s.get("media")), []).append(float(s[key]))
    return out


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    levels = [int(x) for x in args.levels.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "serve.json"  # measure, never refuse: the CPU bound far above what the box has
        config.write_text(json.dumps({"spectator_cpu_cores": 64.0, "spectator_connects_per_s": 200}))
        spec = DaemonSpec(model=args.model, device="cpu", policy=args.policy,
                          extra=("--config", str(config), "--webrtc-hosts", "127.0.0.1"))
        with served(spec) as daemon:
            owner_client = SessionClient(timeout_s=30.0)
            created = await owner_client.create(daemon.url, "world")
            await owner_client.connect()
            link = await _share(daemon.url, created.session_id, created.token)
            owner = Owner(owner_client, args.action_hz)
            tasks = [asyncio.create_task(owner.read()), asyncio.create_task(owner.act())]
            await asyncio.sleep(args.warm_s)
            rows = []
            for n in levels:
                watch_url = f"{daemon.url}/watch.html?session={created.session_id}&token={link}"
                row = await _level(daemon.url, owner, (created.ws_url, created.webrtc_url, watch_url), link,
                                   daemon.pid, n, args)
                print(json.dumps(row), flush=True)
                rows.append(row)
            for t in tasks:
                t.cancel()
            with contextlib.suppress(Exception):
                await owner_client.close_session()
            await owner_client.aclose()
    return {"provenance": provenance("python -m loadtest.spectators " + " ".join(sys.argv[1:])),
            "settings": {"model": args.model, "policy": args.policy, "seconds": args.seconds, "warm_s": args.warm_s,
                         "webrtc": args.webrtc, "chromium": args.chromium,
                         "action_hz": args.action_hz, "fmp4_share": args.fmp4_share, "processes": args.processes},
            "levels": rows, "summary": _summary(rows)}


async def _share(url: str, sid: str, token: str) -> str:
    async with httpx.AsyncClient(timeout=10.0) as http:
        r = await http.post(f"{url}/v1/sessions/{sid}/viewers", json={"ttl_s": 3600, "label": "bench"},
                            headers={"Authorization": f"Bearer {token}"})
        r.raise_for_status()
        return str(r.json()["token"])


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The largest level against no spectators. Levels of the same count (e.g. 0,50,0,50,0) pool
    their owner's action-to-photon samples, so alternating levels spread the box's drift over both."""
    zeros = [r for r in rows if r["spectators"] == 0] or rows[:1]
    extra = max(r["spectators"] for r in rows)
    tops = [r for r in rows if r["spectators"] == extra]
    out: dict[str, Any] = {}

    def mean_of(group: list[dict[str, Any]], key: str) -> float | None:
        values = [r[key] for r in group if r[key] is not None]
        return statistics.mean(values) if values else None

    def pooled_p50(group: list[dict[str, Any]]) -> float | None:
        return _ms(percentile([ms for r in group for ms in r.get("owner_a2p_ms", [])], 50))

    cpu0, rss0 = mean_of(zeros, "daemon_cpu_cores"), mean_of(zeros, "daemon_rss_mib")
    cpu1, rss1 = mean_of(tops, "daemon_cpu_cores"), mean_of(tops, "daemon_rss_mib")
    if extra > 0 and None not in (cpu0, rss0, cpu1, rss1):
        out["cpu_cores_per_spectator"] = round((cpu1 - cpu0) / extra, 4)  # type: ignore[operator]
        out["rss_mib_per_spectator"] = round((rss1 - rss0) / extra, 3)  # type: ignore[operator]
    out["owner_a2p_ms_p50_without"] = [r["owner_a2p_ms_p50"] for r in zeros]
    a2p0, a2p1 = pooled_p50(zeros), pooled_p50(tops)
    out["owner_a2p_ms_p50_pooled"] = {"0": a2p0, str(extra): a2p1,
                                      "samples": [sum(r["owner_a2p_samples"] for r in g) for g in (zeros, tops)]}
    if a2p0 and a2p1 and extra > 0:
        out["owner_a2p_p50_change"] = round(a2p1 / a2p0 - 1.0, 3)
    out["targets"] = {
        "every_spectator_at_15fps": all(r["spectators_at_15fps"] == r["spectators"] for r in tops),
        "owner_a2p_p50_within_10pct": out.get("owner_a2p_p50_change") is not None
        and abs(out["owner_a2p_p50_change"]) <= 0.10,
        "first_frame_within_1s": all(r["first_frame_s_max"] is not None and r["first_frame_s_max"] <= 1.0
                                     for r in tops),
    }
    return out


def _markdown(result: dict[str, Any]) -> str:
    p = result["provenance"]
    lines = ["# Spectators of one world session", "",
             f"`{p['command']}` at commit {p['git_commit'][:10]} (dirty: {p['git_dirty']}), {p['date_utc']}, "
             f"{p['cpu']} x{p['cpu_count']}, load average at start {tuple(round(x, 2) for x in p['load_avg_at_start'])}"
             " (a shared box: other work ran beside it).", "",
             "| spectators (WebRTC, Chromium) | ok | owner a2p p50 / p95 ms | owner fps | spectator fps min / median "
             "| WebRTC fps min | Chromium fps min | >= 15 fps "
             "| first frame max / median s | bytes/s each | daemon CPU cores | shared packing cores | daemon RSS MiB "
             "| client CPU cores |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["levels"]:
        lines.append(f"| {r['spectators']} ({r['webrtc_spectators']}, {r.get('chromium_spectators', 0)}) "
                     f"| {r['spectators_ok']} "
                     f"| {r['owner_a2p_ms_p50']} / {r['owner_a2p_ms_p95']} "
                     f"| {r['owner_fps']} | {r['spectator_fps_min']} / {r['spectator_fps_median']} | {r['webrtc_fps_min']} "
                     f"| {r.get('chromium_fps_min')} "
                     f"| {r['spectators_at_15fps']} | {r['first_frame_s_max']} / {r['first_frame_s_median']} "
                     f"| {r['bytes_per_spectator_per_s']} | {r['daemon_cpu_cores']} | {r['shared_pack_cores']} "
                     f"| {r['daemon_rss_mib']} | {r['client_cpu_cores']} |")
    lines += ["", "First frame, the slowest of each kind of spectator per level (s): "
              + "; ".join(f"{r['spectators']}: " + ", ".join(f"{m} {v}" for m, v in
                                                             sorted(r.get("first_frame_s_max_by_media", {}).items()))
                          for r in result["levels"] if r["spectators"]),
              "", "Chromium tabs on the way there, the slowest tab's marks per level (s from navigation start): "
              + "; ".join(f"{r['spectators']}: " + ", ".join(f"{m} {v}" for m, v in r.get("chromium_marks_s_max", {}).items())
                          + f" (first frame after connecting: {r.get('chromium_after_connecting_s_max')})"
                          for r in result["levels"] if r["spectators"] and r.get("chromium_marks_s_max")),
              "", "aiortc peers on the way there, the slowest peer's marks per level (s from its offer): "
              + "; ".join(f"{r['spectators']}: " + ", ".join(f"{m} {v}" for m, v in r.get("webrtc_marks_s_max", {}).items())
                          for r in result["levels"] if r["spectators"] and r.get("webrtc_marks_s_max")),
              "", "Summary: `" + json.dumps(result["summary"]) + "`", ""]
    return "\n".join(lines)


def _plot(result: dict[str, Any], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = result["levels"]
    n = [r["spectators"] for r in rows]
    fig = Figure(figsize=(10, 3.5))
    FigureCanvasAgg(fig)
    ax1, ax2, ax3 = fig.subplots(1, 3)
    ax1.plot(n, [r["owner_a2p_ms_p50"] or 0 for r in rows], "o-", label="p50")
    ax1.plot(n, [r["owner_a2p_ms_p95"] or 0 for r in rows], "o-", label="p95")
    ax1.set(title="owner action-to-photon (ms)", xlabel="spectators")
    ax1.legend()
    ax2.plot(n, [r["spectator_fps_min"] or 0 for r in rows], "o-", label="min")
    ax2.plot(n, [r["spectator_fps_median"] or 0 for r in rows], "o-", label="median")
    ax2.plot(n, [r["owner_fps"] for r in rows], "k--", label="owner")
    ax2.set(title="frames/s", xlabel="spectators")
    ax2.legend()
    ax3.plot(n, [r["daemon_cpu_cores"] for r in rows], "o-")
    ax3.set(title="daemon CPU (cores)", xlabel="spectators")
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m loadtest.spectators", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="demo")
    ap.add_argument("--policy", default="kv", help="admission policy of the served daemon (kv: admit the one session)")
    ap.add_argument("--levels", default="0,10,25,50,0", help="spectators per level, in order (0 again last: drift)")
    ap.add_argument("--seconds", type=float, default=15.0, help="measured seconds per level")
    ap.add_argument("--warm-s", type=float, default=3.0, help="seconds after spectators connect before measuring")
    ap.add_argument("--action-hz", type=float, default=4.0)
    ap.add_argument("--fmp4-share", type=float, default=0.3, help="share of spectators on fMP4 (the rest raw)")
    ap.add_argument("--processes", type=int, default=5, help="spectator client processes per level")
    ap.add_argument("--webrtc", type=int, default=3, help="spectators of each level on WebRTC (aiortc peers)")
    ap.add_argument("--chromium", type=int, default=2,
                    help="spectators of each level as tabs of the spectator page in headless Chromium")
    ap.add_argument("--out", default="results/spectators")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ws-url", help=argparse.SUPPRESS)
    ap.add_argument("--token", help=argparse.SUPPRESS)
    ap.add_argument("--medias", help=argparse.SUPPRESS)
    ap.add_argument("--rtc", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--webrtc-url", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        if args.rtc:
            import transports.webrtc.watch  # noqa: F401  (aiortc's import is the slow part of getting ready)
        else:
            import websockets.asyncio.client  # noqa: F401
        wait_for_go()
        asyncio.run(_worker(args))
        return
    result = asyncio.run(_run(args))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "spectators.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "spectators.md").write_text(_markdown(result))
    _plot(result, out / "spectators.png")
    print(_markdown(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
