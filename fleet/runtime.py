"""The Dynamo distributed runtime, behind the few calls the fleet makes: open it for one
discovery backend, serve the worker's control endpoint, and call one instance directly.

Imported only by fleet code that needs the runtime; `dynamo` itself is imported lazily so the
rest of the project runs without the `fleet` extra. Discovery on one host is Dynamo's `file`
store (a directory every process on the host shares; no etcd); across hosts it is etcd. The
request plane is TCP: no NATS is needed for control calls.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ADDRESS_VARIABLES", "CONTROL_ENDPOINT", "ControlClient", "RuntimeConfig", "open_runtime", "serve_control"]

CONTROL_ENDPOINT = "control"
# the runtime's variables for the addresses its servers bind (ai-dynamo-runtime 1.6): the request
# plane, the response-stream server every caller opens, the system-status server (only with
# DYN_SYSTEM_PORT), the ZMQ event plane (only when events are published; the fleet publishes none)
ADDRESS_VARIABLES = ("DYN_TCP_RPC_HOST", "DYN_TCP_RESPONSE_STREAM_HOST", "DYN_SYSTEM_HOST", "DYN_EVENT_PLANE_HOST")
_DISCOVERY = ("file", "etcd")

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class RuntimeConfig:
    """Where the runtime discovers workers and which address its request plane binds."""

    discovery: str = "file"  # "file" (one host) | "etcd" (many hosts)
    file_dir: str | None = None  # the shared discovery directory for `file`
    etcd_endpoints: str | None = None  # e.g. "http://10.0.0.5:2379" for `etcd`
    # the one address every listener of the runtime binds and advertises: the TCP request plane (a
    # worker's control endpoint), the TCP response streams (a caller's: gateway, drain, a draining
    # worker), and the system-status and event-plane servers should they be turned on; None: the
    # runtime picks a routable address of the host itself
    rpc_host: str | None = None
    namespace: str = "sessiond"
    component: str = "worker"

    def __post_init__(self) -> None:
        if self.discovery not in _DISCOVERY:
            raise ValueError(f"discovery must be one of {', '.join(_DISCOVERY)}, got {self.discovery!r}")
        if self.discovery == "file" and not self.file_dir:
            raise ValueError("file discovery needs file_dir: a directory every worker and gateway on the "
                             "host shares (e.g. /run/sessiond/discovery)")
        if self.discovery == "etcd" and not self.etcd_endpoints:
            raise ValueError("etcd discovery needs etcd_endpoints, e.g. http://10.0.0.5:2379")
        for name in (self.namespace, self.component):
            if not name or "." in name or "/" in name:
                raise ValueError(f"namespace and component must be non-empty without '.' or '/', got {name!r}")

    def env(self) -> dict[str, str]:
        """The DYN_* / ETCD_* variables the runtime reads for this configuration."""
        out = {"DYN_DISCOVERY_BACKEND": self.discovery, "DYN_REQUEST_PLANE": "tcp"}
        if self.file_dir:
            out["DYN_FILE_KV"] = self.file_dir
        if self.etcd_endpoints:
            out["ETCD_ENDPOINTS"] = self.etcd_endpoints
        if self.rpc_host:
            out.update(dict.fromkeys(ADDRESS_VARIABLES, self.rpc_host))
        return out

    @property
    def endpoint_path(self) -> str:
        return f"{self.namespace}.{self.component}.{CONTROL_ENDPOINT}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> RuntimeConfig:
        return cls(discovery=environ.get("DYN_DISCOVERY_BACKEND", "file"), file_dir=environ.get("DYN_FILE_KV"),
                   etcd_endpoints=environ.get("ETCD_ENDPOINTS"), rpc_host=environ.get("DYN_TCP_RPC_HOST"),
                   namespace=environ.get("SESSIOND_FLEET_NAMESPACE", "sessiond"))


def open_runtime(config: RuntimeConfig) -> Any:
    """A DistributedRuntime on the running loop. The runtime reads its settings from the process
    environment, so this sets them first: call it once per process, at start-up."""
    os.environ.update(config.env())
    from dynamo.runtime import DistributedRuntime

    return DistributedRuntime(asyncio.get_running_loop(), config.discovery, "tcp")


async def serve_control(endpoint: Any, handler: Handler) -> None:
    """Serve `handler` (one JSON object in, one out) on a runtime endpoint until it shuts down."""

    async def generate(request: Any, context: Any = None) -> AsyncIterator[dict[str, Any]]:
        yield await handler(request if isinstance(request, dict) else {})

    # serve_endpoint answers a future, not a coroutine
    await asyncio.ensure_future(endpoint.serve_endpoint(generate))


class ControlClient:
    """Calls the control endpoint of one chosen worker instance (the runtime's direct routing)."""

    def __init__(self, client: Any, timeout_s: float = 10.0) -> None:
        self._client = client
        self.timeout_s = timeout_s

    @classmethod
    async def open(cls, runtime: Any, config: RuntimeConfig, timeout_s: float = 10.0) -> ControlClient:
        endpoint = runtime.endpoint(config.endpoint_path)
        return cls(await endpoint.client(), timeout_s)

    def instance_ids(self) -> list[int]:
        return list(self._client.instance_ids())

    async def call(self, instance_id: int, request: dict[str, Any]) -> dict[str, Any]:
        async def one() -> dict[str, Any]:
            stream = await self._client.direct(request, instance_id, annotated=False)
            async for item in stream:
                return dict(item)
            raise ConnectionError(f"worker instance {instance_id} closed the call without a reply")

        return await asyncio.wait_for(one(), self.timeout_s)
