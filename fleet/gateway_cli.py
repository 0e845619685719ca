"""`python -m fleet.gateway_cli` (also `sessiond gateway`): run a gateway (uvicorn) over a Redis
directory and the Dynamo runtime."""

from __future__ import annotations

import argparse
import logging
import socket

from fleet.gateway import GatewayConfig, create_gateway_app
from fleet.runtime import RuntimeConfig

# on SIGTERM, how long open connections (proxied WebSockets) may take to close before they are cut;
# the lifespan's own stop is bounded too (`fleet.tasks`), so a gateway always ends soon after
GRACEFUL_SHUTDOWN_S = 10
KEEP_ALIVE_S = 30  # idle keep-alive connections, as sessiond's server: above client pools' 5 s expiry

__all__ = ["GRACEFUL_SHUTDOWN_S", "KEEP_ALIVE_S", "add_arguments", "add_fleet_arguments", "build_parser", "main", "run", "runtime_of"]


def add_fleet_arguments(p: argparse.ArgumentParser) -> None:
    """How a fleet client (a gateway, `sessiond drain`) finds the directory and the workers."""
    p.add_argument("--redis", "--redis-url", dest="redis", required=True,
                   help="the session directory, e.g. redis://10.0.0.2:6379/0")
    p.add_argument("--discovery", choices=("file", "etcd"), default="file")
    p.add_argument("--discovery-dir", default="/tmp/sessiond-discovery",
                   help="file discovery: the directory the host's workers register in")
    p.add_argument("--etcd", default=None, help="etcd discovery: endpoints, e.g. http://10.0.0.5:2379")
    p.add_argument("--rpc-host", default=None,
                   help="the address the runtime's listeners bind and advertise, which the workers connect back to "
                   "with their replies (default: --host when it names one address; for `drain` on file discovery "
                   "127.0.0.1; else a routable address the runtime picks)")


_EVERY_ADDRESS = ("0.0.0.0", "::", "")


def runtime_of(args: argparse.Namespace) -> RuntimeConfig:
    """The runtime's configuration from the flags. Its listeners bind --rpc-host; without it the
    gateway's --host (unless that is every address, which names none the workers could reach), and
    on file discovery (one host) loopback: a process never listens where its flags did not say."""
    host = getattr(args, "host", None)
    rpc_host = args.rpc_host
    if rpc_host is None and host is not None and host not in _EVERY_ADDRESS:
        rpc_host = host
    if rpc_host is None and args.discovery == "file":
        rpc_host = "127.0.0.1"
    return RuntimeConfig(discovery=args.discovery, file_dir=args.discovery_dir if args.discovery == "file" else None,
                         etcd_endpoints=args.etcd, rpc_host=rpc_host)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    add_fleet_arguments(p)
    p.add_argument("--max-asks", type=int, default=8, help="workers asked per create before refusing")
    p.add_argument("--sweep-s", type=float, default=1.0,
                   help="seconds between failover sweeps (sessions of dead workers are re-placed)")
    p.add_argument("--orphan-scan-s", type=float, default=30.0,
                   help="seconds between scans for sessions bound to workers with no live record (also at start)")
    p.add_argument("--proxy", action="store_true",
                   help="carry WebSocket media and WebRTC offers through the gateway (one origin for clients); "
                   "create responses then name the gateway's URLs")
    p.add_argument("--public-url", default=None,
                   help="the base URL clients reach this gateway at (default: the Host of each request), "
                   "e.g. https://play.example.com behind a TLS proxy: --proxy's media URLs and every share "
                   "link's and invite's page are built on it")
    p.add_argument("--web-dir", default=None)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sessiond gateway", description="one public API in front of a fleet of workers")
    add_arguments(p)
    return p


def run(args: argparse.Namespace, sockets: list[socket.socket] | None = None) -> int:
    """Serve until SIGTERM/SIGINT: on `sockets` when given (bound before anything started, as
    `sessiond gateway` does), else uvicorn binds --host/--port itself."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    runtime = runtime_of(args)
    config = GatewayConfig(redis_url=args.redis, runtime=runtime, web_dir=args.web_dir, max_asks=args.max_asks,
                           sweep_s=args.sweep_s, orphan_scan_s=args.orphan_scan_s, proxy=args.proxy,
                           public_url=args.public_url)
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(create_gateway_app(config), host=args.host, port=args.port,
                                           log_level="warning", timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                                           timeout_keep_alive=KEEP_ALIVE_S))
    server.run(sockets=sockets)
    return 0 if server.started else 1


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
