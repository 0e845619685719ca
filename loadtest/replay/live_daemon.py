"""A daemon with a given admission policy, in a thread of this process, for policy comparisons.

It runs the real app under uvicorn on its own event loop; the daemon runs a cost-model policy it is
handed as it runs one it builds (measured steps correct the cost model, ticks feed the duty tracker)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import httpx

from engine.api import EngineProtocol
from sessiond.admission.policy import PolicyBase

__all__ = ["free_port", "policy_daemon"]

_POLL_S = 0.25


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def policy_daemon(engine: EngineProtocol, policy: PolicyBase, *, model: str, max_batch: int,
                  ready_timeout_s: float = 120.0) -> Iterator[str]:
    """Yields the daemon's URL; stops it (its sessions closed) on exit."""
    import uvicorn

    from sessiond.api.app import create_app
    from sessiond.api.server import uvicorn_config
    from sessiond.config import ServeConfig

    config = ServeConfig.from_mapping({"model": model, "port": free_port(), "policy": policy.name,
                                       "max_batch": max_batch})
    app = create_app(config, engine, admission=policy)
    server = uvicorn.Server(uvicorn_config(app, config, log_level="warning"))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(),), name=f"daemon-{policy.name}",
                              daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{config.port}"
    try:
        deadline = time.monotonic() + ready_timeout_s
        while not _ready(url):
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError(f"the {policy.name} daemon at {url} did not become ready")
            time.sleep(0.1)
        yield url
    finally:
        server.should_exit = True
        thread.join(60)
        if not thread.is_alive():
            loop.close()


def _ready(url: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200
    return False
