"""Stopping a child process the way every tool here does: SIGTERM, then SIGKILL if it lingers."""

from __future__ import annotations

import subprocess

__all__ = ["stop_process"]


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """Terminate `proc` and wait up to `grace_s` for it; kill it if it has not gone by then."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
