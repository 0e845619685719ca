"""`sessiond fleet-up`: a whole fleet on one host — one worker per visible GPU (or N CPU workers)
and a gateway, sharing file discovery and one Redis. Each is its own process; SIGTERM/SIGINT is
passed to every worker (they drain) and the gateway, and the command waits for all of them."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["FleetPlan", "add_parser", "plan", "run", "visible_gpus"]


@dataclass(frozen=True)
class FleetPlan:
    workers: list[list[str]]  # one argv per worker
    gateway: list[str]


def visible_gpus() -> int:
    """CUDA devices this process can see (0 without CUDA)."""
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def plan(args: argparse.Namespace, gpus: int, host_name: str) -> FleetPlan:
    """The commands to start: worker i on --worker-port + i (device cuda:i, or cpu with a key of its
    own), then the gateway on --port."""
    python = [sys.executable, "-m", "sessiond.cli"]
    common = ["--redis-url", args.redis_url, "--discovery-dir", args.discovery_dir]
    count = gpus if args.cpu_workers is None else args.cpu_workers
    workers = []
    for i in range(count):
        device = f"cuda:{i}" if args.cpu_workers is None else "cpu"
        key = f"{host_name}/{device}" if args.cpu_workers is None else f"{host_name}/cpu-{i}"
        workers.append([*python, "serve", "--fleet", "--host", args.host, "--port", str(args.worker_port + i),
                        "--model", args.model, "--device", device, "--worker-key", key, *common,
                        # the gateway's pages post WebRTC offers straight to the worker (not with --proxy)
                        *([] if args.proxy else ["--cors-origins", f"http://{args.host}:{args.port}"]),
                        *args.serve_args])
    gateway = [*python, "gateway", "--host", args.host, "--port", str(args.port), *common,
               *(["--proxy"] if args.proxy else [])]
    return FleetPlan(workers, gateway)


def add_parser(sub: Any, name: str) -> None:
    up = sub.add_parser(
        name,
        help="start a fleet on this host: a worker per GPU and a gateway",
        description="Start one `sessiond serve --fleet` worker per visible GPU (or --cpu-workers N on CPU, for "
        "trying it out) and one `sessiond gateway`, all on file discovery and one Redis. Clients use the "
        "gateway's URL. Options after `--` go to every worker's `sessiond serve`.",
    )
    up.add_argument("--redis-url", required=True, help="the shared Redis (run it with --appendonly yes)")
    up.add_argument("--host", default="127.0.0.1", help="address of the gateway and the workers")
    up.add_argument("--port", type=int, default=8000, help="the gateway's port")
    up.add_argument("--worker-port", type=int, default=8001, help="the first worker's port (then +1 each)")
    up.add_argument("--model", default="demo")
    up.add_argument("--cpu-workers", type=int, default=None, help="start N CPU workers instead of one per GPU")
    up.add_argument("--discovery-dir", default="/tmp/sessiond-discovery")
    up.add_argument("--proxy", action="store_true", help="media through the gateway too (one origin for clients)")
    up.add_argument("serve_args", nargs=argparse.REMAINDER, help="-- then options for every worker")


def run(args: argparse.Namespace) -> int:
    if args.serve_args and args.serve_args[0] == "--":
        args.serve_args = args.serve_args[1:]
    gpus = visible_gpus() if args.cpu_workers is None else 0
    if args.cpu_workers is None and gpus == 0:
        print("sessiond fleet-up: no CUDA device is visible; use --cpu-workers N to start CPU workers")
        return 2
    fleet = plan(args, gpus, socket.gethostname())
    os.makedirs(args.discovery_dir, exist_ok=True)
    names = [f"worker on port {args.worker_port + i}" for i in range(len(fleet.workers))] + \
        [f"gateway on port {args.port}"]
    procs = [subprocess.Popen(argv) for argv in [*fleet.workers, fleet.gateway]]
    print(f"sessiond fleet-up: {len(fleet.workers)} workers, gateway on http://{args.host}:{args.port}/", flush=True)

    def stop_all() -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop_all())
    signal.signal(signal.SIGINT, lambda _signum, _frame: stop_all())
    return _wait(procs, names, stop_all)


def _wait(procs: list[subprocess.Popen[bytes]], names: list[str], stop_all: Callable[[], None]) -> int:
    """Wait for every child; the first that fails (its port taken, a bad option) stops the others:
    a fleet with a part missing is not left running. The exit status is the first failure's."""
    status = 0
    reported: set[int] = set()
    while any(proc.poll() is None for proc in procs):
        for i, proc in enumerate(procs):
            code = proc.poll()
            if code is not None and i not in reported:
                reported.add(i)
                if code != 0 and status == 0:
                    status = code
                    print(f"sessiond fleet-up: the {names[i]} exited with status {code}; stopping the others",
                          file=sys.stderr, flush=True)
                    stop_all()
        time.sleep(0.2)
    return status or next((proc.returncode for proc in procs if proc.returncode), 0)
