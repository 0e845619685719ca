"""`python -m fleet.bench_proxy`: what the gateway's proxy mode costs. A local fleet (a private
redis-server, one `sessiond serve --fleet` worker, one `sessiond gateway --proxy`) serves N
sessions whose WebSockets go through the gateway; the gateway process's CPU time over a window is
divided by the media seconds and frames it relayed (its idle CPU, measured first, subtracted).
Added latency: `ping` round trips on one more session, alternately through the gateway and
straight to the worker, while the N streams run.

Prints one line per media and writes a JSON report with its provenance."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from fleet.local import LocalFleet, cpu_seconds, local_fleet, provenance
from fleet.urls import media_urls
from protocols.client import SessionClient
from protocols.messages import Frame, Media

__all__ = ["MediaResult", "main"]


@dataclass(frozen=True)
class MediaResult:
    media: str
    streams: int
    window_s: float
    frames: int
    messages: int
    media_bytes: int
    fps: int
    gateway_cpu_s: float  # over the window, the idle rate subtracted
    cpu_ms_per_media_s: float  # gateway CPU per second of one stream's media
    cpu_ms_per_frame: float
    cpu_ms_per_mb: float
    cpu_share_of_core: float
    rtt_direct_ms: dict[str, float]
    rtt_proxied_ms: dict[str, float]
    added_latency_ms: float  # median round trip through the gateway minus straight to the worker


async def _read(client: SessionClient, counts: dict[str, int], stop: asyncio.Event) -> None:
    async for msg in client.messages():
        if isinstance(msg, Frame):
            counts["frames"] += 1
            counts["bytes"] += len(msg.data)
        elif isinstance(msg, Media):
            counts["frames"] += msg.n
            counts["bytes"] += len(msg.data)
        counts["messages"] += 1
        if stop.is_set():
            return


async def _rtts(client: SessionClient, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await client.ping()
        out.append((time.perf_counter() - t0) * 1000.0)
        await asyncio.sleep(0.05)
    return out


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": round(statistics.median(ordered), 3), "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
            "n": len(ordered)}


async def _latency(gw: str, worker_url: str, pings: int, media: str) -> tuple[list[float], list[float]]:
    """Ping round trips on one session: alternately through the gateway and straight to the worker."""
    client = SessionClient(timeout_s=20, auto_received=True)
    proxied: list[float] = []
    direct: list[float] = []
    try:
        created = await client.create(gw, "world")
        rounds = 4
        for _ in range(rounds):
            for via, into in ((created.ws_url, proxied), (media_urls(worker_url, created.session_id)["ws_url"], direct)):
                client.session = dataclasses.replace(created, ws_url=via)
                await client.connect(media)
                draining = asyncio.create_task(_drain_messages(client))
                into.extend(await _rtts(client, max(1, pings // rounds)))
                draining.cancel()
                await client.disconnect()
        await client.close_session()
    finally:
        await client.aclose()
    return direct, proxied


async def _drain_messages(client: SessionClient) -> None:
    async for _ in client.messages():
        pass


async def _measure(fleet: LocalFleet, media: str, streams: int, seconds: float, pings: int,
                   idle_cpu_per_s: float) -> MediaResult:
    assert fleet.gateway is not None
    gw_proc, gw = fleet.gateway
    worker_url = next(iter(fleet.workers.values()))[1]
    clients = [SessionClient(timeout_s=20, auto_received=True) for _ in range(streams)]
    counts = {"frames": 0, "messages": 0, "bytes": 0}
    stop = asyncio.Event()
    try:
        for c in clients:
            await c.create(gw, "world")
            await c.connect(media)
        readers = [asyncio.create_task(_read(c, counts, stop)) for c in clients]
        await asyncio.sleep(3.0)  # warm: first chunks, encoders opened
        before = dict(counts)
        cpu0, t0 = cpu_seconds(gw_proc.pid), time.monotonic()
        await asyncio.sleep(seconds)
        cpu1, t1 = cpu_seconds(gw_proc.pid), time.monotonic()
        after = dict(counts)
        direct, proxied = await _latency(gw, worker_url, pings, media)
        stop.set()
        for r in readers:
            r.cancel()
        for c in clients:
            await c.disconnect()
            await c.close_session()
    finally:
        for c in clients:
            await c.aclose()
    window = t1 - t0
    cpu = max(0.0, (cpu1 - cpu0) - idle_cpu_per_s * window)
    frames = after["frames"] - before["frames"]
    fps = clients[0].session.fps if clients[0].session else 16
    media_s = frames / fps
    mb = (after["bytes"] - before["bytes"]) / 1e6
    return MediaResult(
        media=media, streams=streams, window_s=round(window, 3), frames=frames,
        messages=after["messages"] - before["messages"], media_bytes=after["bytes"] - before["bytes"], fps=fps,
        gateway_cpu_s=round(cpu, 4), cpu_ms_per_media_s=round(1000 * cpu / max(media_s, 1e-9), 3),
        cpu_ms_per_frame=round(1000 * cpu / max(frames, 1), 4), cpu_ms_per_mb=round(1000 * cpu / max(mb, 1e-9), 2),
        cpu_share_of_core=round(cpu / window, 4), rtt_direct_ms=_summary(direct), rtt_proxied_ms=_summary(proxied),
        added_latency_ms=round(statistics.median(proxied) - statistics.median(direct), 3))


async def _run(args: argparse.Namespace) -> list[MediaResult]:
    with local_fleet(Path(args.logs) if args.logs else None) as fleet:
        fleet.start_worker("bench/cpu-0", "--model", args.model, "--device", "cpu", "--max-sessions",
                           str(args.streams + 2), *(["--cpu-threads", str(args.cpu_threads)] if args.cpu_threads else []))
        fleet.start_gateway("--proxy")
        await asyncio.to_thread(fleet.wait_ready)
        assert fleet.gateway is not None
        pid = fleet.gateway[0].pid
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        await asyncio.sleep(args.idle_s)
        idle = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
        print(f"gateway idle: {1000 * idle:.1f} CPU ms/s (sweeps, capacity reads)", flush=True)
        results = []
        for media in args.media.split(","):
            r = await _measure(fleet, media, args.streams, args.seconds, args.pings, idle)
            print(f"{media}: {r.streams} streams x {r.window_s:.0f} s, {r.frames} frames ({r.media_bytes / 1e6:.1f} MB): "
                  f"gateway {r.cpu_ms_per_media_s:.2f} CPU ms per media second, {r.cpu_ms_per_frame:.3f} ms per frame, "
                  f"{r.cpu_ms_per_mb:.1f} ms per MB, {100 * r.cpu_share_of_core:.1f}% of a core; ping median "
                  f"{r.rtt_direct_ms['median']:.2f} ms direct, {r.rtt_proxied_ms['median']:.2f} ms proxied "
                  f"(+{r.added_latency_ms:.2f} ms)", flush=True)
            results.append(r)
        args.idle_cpu_ms_per_s = round(1000 * idle, 3)
        return results


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m fleet.bench_proxy", description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=4, help="proxied sessions streaming at once")
    p.add_argument("--seconds", type=float, default=20.0, help="the measured window per media")
    p.add_argument("--media", default="raw,fmp4")
    p.add_argument("--pings", type=int, default=40, help="round trips per path for the latency")
    p.add_argument("--idle-s", type=float, default=5.0, help="seconds of the gateway's idle CPU measured first")
    p.add_argument("--model", default="tiny")
    p.add_argument("--cpu-threads", type=int, default=1, help="the worker's torch threads (0: its default)")
    p.add_argument("--json", default=None, help="write the report here")
    p.add_argument("--logs", default=None, help="keep the fleet's process logs in this directory")
    args = p.parse_args(argv)
    results = asyncio.run(_run(args))
    if args.json:
        report = {"provenance": provenance("python -m fleet.bench_proxy " + " ".join(argv)), "idle_cpu_ms_per_s": args.idle_cpu_ms_per_s,
                  "worker": {"model": args.model, "cpu_threads": args.cpu_threads},
                  "results": [asdict(r) for r in results]}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
