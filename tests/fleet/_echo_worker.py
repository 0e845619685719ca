"""A worker process for the runtime tests: registers the control endpoint, answers every call with
its stable key, and on SIGTERM unregisters and exits 0. Usage: python -m tests.fleet._echo_worker KEY"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

from fleet.runtime import RuntimeConfig, open_runtime, serve_control


async def main(key: str) -> None:
    config = RuntimeConfig.from_env(__import__("os").environ)
    runtime = open_runtime(config)
    endpoint = runtime.endpoint(config.endpoint_path)

    async def handle(request: dict[str, Any]) -> dict[str, Any]:
        return {"worker": key, "instance_id": endpoint.connection_id(), "echo": request}

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    serving = asyncio.ensure_future(serve_control(endpoint, handle))
    print(f"instance {endpoint.connection_id()}", flush=True)
    await stop.wait()
    await endpoint.unregister_endpoint_instance()
    runtime.shutdown()
    await asyncio.wait({serving}, timeout=5)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
