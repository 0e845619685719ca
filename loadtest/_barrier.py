"""Client processes that start together: each gets ready (imports, a browser launched), says so,
and waits; the parent starts them all at once.

Why: the spectator benchmark measures how soon a spectator sees its first frame after it connects.
Its client processes run on the daemon's own box, and a Python process importing aiortc or a
Chromium launching takes a core for a second; had each connected as soon as it had started, the
first level's first frames would have measured the clients' start-up fighting the daemon for the
box (1.16-1.20 s on 2 cores where later levels took 0.3-0.8 s), not the daemon's answer to a burst
of connects. Users' clients start on their own machines; here they are ready first, then go.

The child side is a line on stdout (`ready`) and a line on stdin (`go`); the parent's reads the
first and writes the second to every child. The child's report stays its LAST stdout line.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

__all__ = ["READY", "release", "wait_for_go"]

READY = "ready"


def wait_for_go() -> None:
    """Child: say ready, then block until the parent says go (or closes stdin: go too)."""
    print(READY, flush=True)
    sys.stdin.readline()


async def release(children: list[subprocess.Popen[bytes]], timeout_s: float = 120.0) -> None:
    """Parent: wait until every child said ready, then tell them all to go at once. Each child must
    have been started with stdin and stdout pipes; a child that exits or says something else first
    raises RuntimeError naming it."""

    def ready(child: subprocess.Popen[bytes]) -> None:
        assert child.stdout is not None
        line = child.stdout.readline().decode().strip()
        if line != READY:
            raise RuntimeError(f"client process {child.args!r} did not get ready (said {line[:200]!r}, "
                               f"exit code {child.poll()})")

    await asyncio.wait_for(asyncio.gather(*(asyncio.to_thread(ready, c) for c in children)), timeout_s)
    for child in children:
        assert child.stdin is not None
        child.stdin.write(b"go\n")
    for child in children:
        assert child.stdin is not None
        child.stdin.flush()
