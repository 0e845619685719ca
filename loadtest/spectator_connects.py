"""`python -m loadtest.spectator_connects`: what a burst of spectator connects costs the daemon
itself, apart from the clients' own CPU.

The spectator benchmark (`loadtest.spectators`) runs its fifty clients on the daemon's own box,
so a burst's first frames include the clients' start-up (Chromium tabs loading, aiortc peers
negotiating). This tool isolates the daemon's share: one served world session whose owner plays,
then N raw-WebSocket spectators of its share link connected one after another and then all at
once, from this one light process. It prints, as one JSON line: the daemon's event-loop thread CPU
per connect (above its rate while only the owner plays), the median welcome of the one-by-one
connects, and for the burst the time until every spectator was welcomed and had its first frame,
with the loop thread's CPU over that time."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from fleet.local import provenance
from loadtest.replay.daemon_process import DaemonSpec, served
from protocols.client import SessionClient
from protocols.codec import decode, encode
from protocols.messages import Frame, Hello, Welcome

__all__ = ["main", "thread_cpu_s"]

_TICKS = os.sysconf("SC_CLK_TCK")


def thread_cpu_s(pid: int, tid: int | None = None) -> float:
    """CPU seconds (user + system) of one thread of `pid` (default its main thread: the daemon's loop)."""
    fields = Path(f"/proc/{pid}/task/{tid or pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


async def _spectator(ws_url: str, token: str) -> tuple[Any, float, float]:
    """(its socket, welcome s, first frame s) of one raw spectator."""
    from websockets.asyncio.client import connect

    began = time.monotonic()
    ws = await connect(f"{ws_url}?media=raw", additional_headers={"Authorization": f"Bearer {token}"},
                       compression=None, max_size=None, proxy=None, close_timeout=1)
    await ws.send(encode(Hello(v=1)))
    welcome = decode(await ws.recv(decode=False), expect="server")
    if not isinstance(welcome, Welcome):
        raise RuntimeError(f"spectator refused: {welcome!r}")
    welcomed = time.monotonic() - began
    while not isinstance(decode(await ws.recv(decode=False), expect="server"), Frame):
        pass
    return ws, welcomed, time.monotonic() - began


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "serve.json"  # measure, never refuse
        config.write_text(json.dumps({"spectator_cpu_cores": 64.0, "spectator_connects_per_s": 1000}))
        with served(DaemonSpec(model=args.model, policy="kv", extra=("--config", str(config)))) as daemon:
            owner = SessionClient(timeout_s=30.0)
            created = await owner.create(daemon.url, "world")
            await owner.connect()
            async with httpx.AsyncClient(timeout=10.0, trust_env=False) as http:
                r = await http.post(f"{daemon.url}/v1/sessions/{created.session_id}/viewers", json={"ttl_s": 600},
                                    headers={"Authorization": f"Bearer {created.token}"})
                r.raise_for_status()
                token = str(r.json()["token"])

            async def drain() -> None:
                async for _ in owner.messages():
                    pass

            reader = asyncio.create_task(drain())
            await asyncio.sleep(args.warm_s)
            cpu0, t0 = thread_cpu_s(daemon.pid), time.monotonic()
            await asyncio.sleep(args.idle_s)
            idle_cores = (thread_cpu_s(daemon.pid) - cpu0) / (time.monotonic() - t0)

            one_by_one = []
            cpu0, t0 = thread_cpu_s(daemon.pid), time.monotonic()
            for _ in range(args.spectators):
                one_by_one.append(await _spectator(created.ws_url, token))
            wall, cpu = time.monotonic() - t0, thread_cpu_s(daemon.pid) - cpu0
            for ws, _, _ in one_by_one:
                await ws.close()
            await asyncio.sleep(args.idle_s)

            cpu0, t0 = thread_cpu_s(daemon.pid), time.monotonic()
            burst = await asyncio.gather(*(_spectator(created.ws_url, token) for _ in range(args.spectators)))
            burst_wall, burst_cpu = time.monotonic() - t0, thread_cpu_s(daemon.pid) - cpu0
            for ws, _, _ in burst:
                await ws.close()
            reader.cancel()
            await owner.close_session()
            await owner.aclose()
    n = args.spectators
    return {
        "provenance": provenance("python -m loadtest.spectator_connects " + " ".join(sys.argv[1:])),
        "model": args.model, "spectators": n,
        "loop_cores_owner_only": round(idle_cores, 4),
        "one_by_one": {"wall_s": round(wall, 3), "loop_cpu_ms_per_connect": round((cpu - idle_cores * wall) / n * 1e3, 2),
                       "welcome_ms_median": round(statistics.median(w for _, w, _ in one_by_one) * 1e3, 1)},
        "burst": {"all_first_frames_s": round(burst_wall, 3), "loop_cpu_s": round(burst_cpu, 3),
                  "welcome_ms_max": round(max(w for _, w, _ in burst) * 1e3, 1),
                  "first_frame_ms_max": round(max(f for _, _, f in burst) * 1e3, 1)},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadtest.spectator_connects", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="demo")
    ap.add_argument("--spectators", type=int, default=45, help="spectators per pass (default 45)")
    ap.add_argument("--warm-s", type=float, default=3.0, help="owner's play before measuring")
    ap.add_argument("--idle-s", type=float, default=3.0, help="owner-only seconds that set the loop's base rate")
    args = ap.parse_args(argv)
    if args.spectators < 1:
        ap.error(f"--spectators takes a whole number >= 1, got {args.spectators}")
    print(json.dumps(asyncio.run(_run(args))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
