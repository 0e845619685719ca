"""`sessiond drain --redis-url URL --worker KEY` (also `python -m fleet.drain_cli`): tell one worker
to drain, the same as SIGTERM on its host: it stops admitting, moves each session to another
worker (its viewers get `moved`), withdraws its record and exits. The worker is found by its key
in the directory; the call goes through the Dynamo runtime like a gateway's. With `--wait-s`, the
command waits for the worker to leave and prints where each session went."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from fleet.control import reply_error
from fleet.directory import RedisDirectory
from fleet.errors import FleetError
from fleet.gateway_cli import add_fleet_arguments, runtime_of
from fleet.runtime import ControlClient, open_runtime

__all__ = ["add_arguments", "main", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_fleet_arguments(p)
    p.add_argument("--worker", required=True, help="the worker's key (host/device), as /v1/capacity lists it")
    p.add_argument("--wait-s", type=float, default=0.0,
                   help="wait up to this long for the worker to leave, then print where its sessions went")
    p.add_argument("--timeout-s", type=float, default=30.0, help="the drain call's timeout")


async def _drain(args: argparse.Namespace) -> int:
    directory = RedisDirectory(args.redis)
    try:
        workers = {w.worker: w for w in await directory.workers()}
        target = workers.get(args.worker)
        if target is None:
            print(f"sessiond drain: no live worker {args.worker!r}; live workers: "
                  f"{', '.join(sorted(workers)) or 'none'}", file=sys.stderr)
            return 2
        if target.draining:
            print(f"sessiond drain: {args.worker} is already draining")
        config = runtime_of(args)
        runtime = open_runtime(config)
        try:
            control = await ControlClient.open(runtime, config, args.timeout_s)
            reply = await _call(control, target.instance_id)
        finally:
            runtime.shutdown()
        error = reply_error(reply, args.worker)
        if error is not None:
            print(f"sessiond drain: {args.worker} refused: {error.message}", file=sys.stderr)
            return 1
        sessions = [str(s) for s in reply.get("sessions", [])]
        print(f"draining {args.worker}: {len(sessions)} sessions to move", flush=True)
        if args.wait_s > 0:
            return await _wait(directory, args.worker, sessions, args.wait_s)
        return 0
    except FleetError as exc:
        print(f"sessiond drain: {exc}", file=sys.stderr)
        return 1
    finally:
        await directory.close()


async def _call(control: ControlClient, instance_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 10.0
    while True:  # the runtime's client may need a moment to discover the instance
        try:
            return await control.call(instance_id, {"op": "drain"})
        except Exception:  # the runtime's own error types: not discovered yet, or gone
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.2)


async def _wait(directory: RedisDirectory, worker: str, sessions: list[str], wait_s: float) -> int:
    deadline = time.monotonic() + wait_s
    while worker in {w.worker for w in await directory.workers()}:
        if time.monotonic() >= deadline:
            print(f"sessiond drain: {worker} still listed after {wait_s:.0f} s", file=sys.stderr)
            return 1
        await asyncio.sleep(0.2)
    for sid in sessions:
        binding = await directory.lookup(sid)
        print(f"{sid} -> {binding.worker if binding else 'closed'}")
    print(f"{worker} has left the fleet")
    return 0


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_drain(args))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sessiond drain", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
