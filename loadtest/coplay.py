"""Co-play benchmark: N players (the owner and N-1 invited) steer one world session of a real
`sessiond serve`, each over its own raw WebSocket (`--transport ws`, the default) or its own WebRTC
peer (`--transport webrtc`: aiortc on loopback, the owner's own peer, the co-players viewers of the
session's shared encode), each sending actions at `--action-hz`; each player's action-to-photon is
measured on its own (client side: an action's send to the arrival of the first frame whose
`action_seq` — that player's own — reaches it; over WebRTC, the first DECODED video frame whose pts
a `frames` message tied to such an action_seq), with frames/s per player.

    python -m loadtest.coplay --players 4 --seconds 30 --out results/coplay
    python -m loadtest.coplay --players 4 --seconds 30 --transport webrtc

writes `coplay_<model>_<N>p.json` and `.md` there. The first `--warmup-s` seconds are not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from fleet.local import cpu_seconds, provenance
from loadtest.replay.daemon_process import DaemonSpec, served
from protocols.client import SessionClient
from protocols.messages import Frame

__all__ = ["PlayerRun", "main", "run_coplay"]

_KEYS = (("w",), ("w", "a"), ("a",), ("s",), ("d",), ("w", "d"))


@dataclass(frozen=True)
class Seen:
    """A decoded WebRTC frame, with what its `frames` message said of it."""

    idx: int
    action_seq: int
    players: tuple[int, ...] | None


@dataclass
class PlayerRun:
    player: int
    sent: dict[int, float] = field(default_factory=dict)  # seq -> monotonic send time
    pending: list[int] = field(default_factory=list)  # seqs sent and not yet seen applied, in order
    a2p_ms: list[float] = field(default_factory=list)
    frames: int = 0
    first_idx: int | None = None
    last_idx: int = -1
    mismatched: int = 0  # frames whose action_seq was not this player's own entry of `players`

    def on_frame(self, frame: Frame | Seen, now: float, counting: bool) -> None:
        if frame.players is not None and frame.players[self.player] != frame.action_seq:
            self.mismatched += 1
        if counting:
            self.frames += 1
            if self.first_idx is None:
                self.first_idx = frame.idx
            self.last_idx = frame.idx
        while self.pending and self.pending[0] <= frame.action_seq:
            seq = self.pending.pop(0)
            if counting:
                self.a2p_ms.append((now - self.sent.pop(seq)) * 1000.0)
            else:
                self.sent.pop(seq, None)

    def summary(self, seconds: float) -> dict[str, Any]:
        values = sorted(self.a2p_ms)

        def q(p: float) -> float | None:
            return round(values[min(len(values) - 1, int(p * len(values)))], 1) if values else None

        return {"player": self.player, "a2p_p50_ms": round(statistics.median(values), 1) if values else None,
                "a2p_p95_ms": q(0.95), "a2p_samples": len(values), "frames": self.frames,
                "frames_per_s": round(self.frames / seconds, 2), "mismatched_action_seq": self.mismatched,
                "actions_unanswered": len(self.pending)}


async def _play(client: SessionClient, run: PlayerRun, hz: float, start: float, warmup_s: float, end: float) -> None:
    async def send() -> None:
        i = 0
        while time.monotonic() < end:
            action = await client.send_action(list(_KEYS[(i + run.player) % len(_KEYS)]))
            run.sent[action.seq] = time.monotonic()
            run.pending.append(action.seq)
            i += 1
            await asyncio.sleep(1.0 / hz)

    async def read() -> None:
        async for msg in client.messages():
            now = time.monotonic()
            if isinstance(msg, Frame):
                run.on_frame(msg, now, now >= start + warmup_s)
            if now >= end:
                return

    await asyncio.gather(send(), read())


async def _play_rtc(webrtc_url: str, token: str, fps: int, run: PlayerRun, hz: float, start: float, warmup_s: float,
                    end: float) -> None:
    """One player over its own WebRTC peer: `python -m transports.webrtc.play` in a process of its own
    (its aiortc decode off this process), whose sends and decoded frames are replayed into `run`."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "transports.webrtc.play", "--webrtc-url", webrtc_url, f"--token={token}",
        "--fps", str(fps), "--action-hz", str(hz), "--until", str(end), "--player", str(run.player),
        stdout=asyncio.subprocess.PIPE)
    stdout, _ = await proc.communicate()
    lines = stdout.decode().strip().splitlines()
    report: dict[str, Any] = json.loads(lines[-1]) if lines else {"error": f"exited {proc.returncode}, no report"}
    if "error" in report:
        raise RuntimeError(f"player {run.player} over WebRTC: {report['error']}")
    events: list[tuple[float, int, list[Any]]] = [(float(t), 0, [seq]) for seq, t in report["sent"]]
    events += [(float(f[0]), 1, list(f[1:])) for f in report["frames"]]
    for t, kind, data in sorted(events, key=lambda e: (e[0], e[1])):
        if kind == 0:
            run.sent[int(data[0])] = t
            run.pending.append(int(data[0]))
        else:
            players = tuple(data[2]) if data[2] is not None else None
            run.on_frame(Seen(int(data[0]), int(data[1]), players), t, t >= start + warmup_s)


async def _session(url: str, players: int, seconds: float, warmup_s: float, hz: float,
                   transport: str = "ws") -> dict[str, Any]:
    if transport == "webrtc":
        return await _session_rtc(url, players, seconds, warmup_s, hz)
    owner = SessionClient(auto_received=True, timeout_s=60.0)
    created = await owner.create(url, "world", players=players)
    clients = [owner]
    async with httpx.AsyncClient(timeout=30.0) as http:
        for _ in range(players - 1):
            reply = await http.post(f"{url}/v1/sessions/{created.session_id}/players", json={},
                                    headers={"Authorization": f"Bearer {created.token}"})
            reply.raise_for_status()
            client = SessionClient(timeout_s=60.0)
            client.attach(url, dataclasses.replace(created, token=reply.json()["token"]))
            clients.append(client)
    await owner.connect()
    for client in clients[1:]:
        await client.connect()
    runs = [PlayerRun(k) for k in range(players)]
    start = time.monotonic()
    end = start + warmup_s + seconds
    try:
        await asyncio.gather(*(_play(c, r, hz, start, warmup_s, end) for c, r in zip(clients, runs, strict=True)))
    finally:
        for client in clients[1:]:
            await client.aclose()
        await owner.close_session()
        await owner.aclose()
    return {"session_id": created.session_id, "players": [r.summary(seconds) for r in runs]}


async def _session_rtc(url: str, players: int, seconds: float, warmup_s: float, hz: float) -> dict[str, Any]:
    owner = SessionClient(timeout_s=60.0)
    created = await owner.create(url, "world", players=players)
    tokens = [created.token]
    async with httpx.AsyncClient(timeout=30.0) as http:
        for _ in range(players - 1):
            reply = await http.post(f"{url}/v1/sessions/{created.session_id}/players", json={},
                                    headers={"Authorization": f"Bearer {created.token}"})
            reply.raise_for_status()
            tokens.append(reply.json()["token"])
    runs = [PlayerRun(k) for k in range(players)]
    start = time.monotonic()
    end = start + warmup_s + seconds
    try:
        await asyncio.gather(*(_play_rtc(created.webrtc_url, t, created.fps, r, hz, start, warmup_s, end)
                               for t, r in zip(tokens, runs, strict=True)))
    finally:
        await owner.close_session()
        await owner.aclose()
    return {"session_id": created.session_id, "players": [r.summary(seconds) for r in runs]}


def run_coplay(model: str, players: int, seconds: float, warmup_s: float, hz: float, policy: str,
               transport: str = "ws", serve_args: tuple[str, ...] = ()) -> dict[str, Any]:
    command = "python -m loadtest.coplay " + " ".join(sys.argv[1:])
    prov = provenance(command)
    spec = DaemonSpec(model=model, policy=policy)
    if transport == "webrtc":  # loopback host candidates only: the players run on this machine
        spec = dataclasses.replace(spec, extra=(*spec.extra, "--webrtc-hosts", "127.0.0.1"))
    if serve_args:
        spec = dataclasses.replace(spec, extra=(*spec.extra, *serve_args))
    with served(spec) as daemon:
        cpu0 = cpu_seconds(daemon.pid)
        t0 = time.monotonic()
        session = asyncio.run(_session(daemon.url, players, seconds, warmup_s, hz, transport))
        wall = time.monotonic() - t0
        cpu = cpu_seconds(daemon.pid) - cpu0
    p50s = [p["a2p_p50_ms"] for p in session["players"] if p["a2p_p50_ms"] is not None]
    return {"provenance": prov, "config": {"model": model, "players": players, "seconds": seconds,
                                           "warmup_s": warmup_s, "action_hz": hz, "policy": policy,
                                           "transport": transport, "serve_args": list(serve_args)},
            "daemon_ready_after_s": daemon.ready_after_s, "daemon_cpu_cores": round(cpu / wall, 2),
            "load_avg_at_end": os.getloadavg(), **session,
            "worst_a2p_p50_ms": max(p50s) if p50s else None}


def markdown(result: dict[str, Any]) -> str:
    c = result["config"]
    p = result["provenance"]
    lines = [f"# Co-play: {c['players']} players in one {c['model']} world session", "",
             f"`{p['command']}` at commit `{p['git_commit'][:10]}`{' (dirty)' if p['git_dirty'] else ''}, "
             f"{p['date_utc']}, {p['cpu']} ({p['cpu_count']} cores, shared with other work: load average "
             f"{', '.join(f'{v:.2f}' for v in p['load_avg_at_start'])} at the start, "
             f"{', '.join(f'{v:.2f}' for v in result['load_avg_at_end'])} at the end).", "",
             f"{c['seconds']:.0f} s measured after {c['warmup_s']:.0f} s of warm-up; each player sends an action "
             f"every {1000 / c['action_hz']:.0f} ms over its own "
             f"{'WebRTC peer (aiortc)' if c.get('transport') == 'webrtc' else 'raw WebSocket'}; action-to-photon = "
             "send to the arrival (WebRTC: the decoding) of the first frame whose action_seq (the player's own) "
             "reaches it. Daemon CPU: "
             f"{result['daemon_cpu_cores']} cores.", "",
             "| player | a2p p50 (ms) | a2p p95 (ms) | samples | frames/s | action_seq not its own |",
             "|---|---|---|---|---|---|"]
    for row in result["players"]:
        lines.append(f"| {row['player']}{' (owner)' if row['player'] == 0 else ''} | {row['a2p_p50_ms']} | "
                     f"{row['a2p_p95_ms']} | {row['a2p_samples']} | {row['frames_per_s']} | "
                     f"{row['mismatched_action_seq']} |")
    lines += ["", f"Worst player's p50: {result['worst_a2p_p50_ms']} ms (target: <= 350 ms on this box)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.coplay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--players", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--action-hz", type=float, default=10.0)
    parser.add_argument("--policy", default="kv", help="the daemon's admission policy (kv: the demo world is "
                        "admitted on a loaded 2-core box, where duty may refuse it)")
    parser.add_argument("--transport", choices=("ws", "webrtc"), default="ws",
                        help="each player's connection: a raw WebSocket (default) or a WebRTC peer (aiortc)")
    parser.add_argument("--serve-arg", action="append", default=[], metavar="FLAG",
                        help="a further `sessiond serve` flag, e.g. --serve-arg=--lead-chunks=0.5 (repeatable)")
    parser.add_argument("--out", type=Path, default=None, help="a folder for the JSON and markdown")
    args = parser.parse_args(argv)
    if not 1 <= args.players <= 8:
        parser.error("--players must be 1..8")
    result = run_coplay(args.model, args.players, args.seconds, args.warmup_s, args.action_hz, args.policy,
                        args.transport, tuple(args.serve_arg))
    text = markdown(result)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        stem = args.out / f"coplay_{args.model}_{args.players}p{'_webrtc' if args.transport == 'webrtc' else ''}"
        stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        stem.with_suffix(".md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
