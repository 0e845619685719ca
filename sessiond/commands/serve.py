"""`sessiond serve`."""

from __future__ import annotations

import argparse
import os
import socket
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessiond.config import ServeConfig

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, name: str) -> None:
    serve = sub.add_parser(
        name,
        help="run the daemon",
        description="Run the session daemon. Defaults: 127.0.0.1:8000, the embedded demo model, "
        "CPU unless CUDA is present, in-memory store. Open http://HOST:PORT/ for the web client.",
    )
    serve.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port to bind (default 8000)")
    serve.add_argument("--model", default=None, help="model config name: demo (default), tiny, wan-1.3b, wan-1.3b-world (sink 1 + window 2 chunks), wan-1.3b-preview, wan-1.3b-world-preview (the TAEHV-layout preview decoder)")
    serve.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda if present, else cpu)")
    serve.add_argument("--redis-url", default=None, help="use a Redis store, e.g. redis://127.0.0.1:6379/0")
    serve.add_argument("--config", default=None, help="a JSON config file of ServeConfig options; flags override it")
    serve.add_argument("--log-json", action="store_true", help="log one JSON object per line")
    serve.add_argument("--log-level", default=None, choices=("debug", "info", "warning"),
                       help="level of every logger, the WebRTC/ICE libraries' included (default: the daemon's "
                       "own lines at info, aiortc, aioice and other libraries at warning)")
    serve.add_argument("--idle-offload-s", type=float, default=None,
                       help="offload an idle session's KV to host memory after this many seconds (default 30) where an "
                            "offload is cheap (<= 50 ms); a dearer one waits until the KV pool needs the room")
    serve.add_argument("--idle-close-s", type=float, default=None,
                       help="close a session idle this many seconds (default 600)")
    serve.add_argument("--no-picture-check", action="store_true",
                       help="do not run the model's own check of its picture (one frame per second per session; "
                            "the demo model tells a lost avatar and a collapsed picture, in a `picture` message)")
    serve.add_argument("--unconnected-close-s", type=float, default=None,
                       help="release a created session no client connects within this many seconds (default 30)")
    serve.add_argument("--reclaim-after-s", type=float, default=None,
                       help="a session idle this many seconds with nobody attached is closed when a new one would "
                            "otherwise be refused for capacity (default 60)")
    serve.add_argument("--lead-chunks", type=float, default=None,
                       help="world mode: the most chunks begun ahead of playback (default: the model's; 2, the demo model 1); "
                       "a session alone on the engine begins its chunks as late as its own chunks measured they may, "
                       "within this (action-to-photon falls with it), unless --fixed-lead")
    serve.add_argument("--fixed-lead", action="store_true",
                       help="world mode: always begin chunks --lead-chunks ahead, not as late as measured")
    serve.add_argument("--max-sessions", type=int, default=None, help="most sessions open at once (default 64)")
    serve.add_argument("--max-batch", type=int, default=None, help="most session-chunks per engine step (default 8)")
    serve.add_argument("--kv-budget-bytes", type=int, default=None, help="device bytes for the KV pool")
    serve.add_argument("--cpu-threads", type=int, default=None,
                       help="torch threads for the engine (default 1 on CPU: more collapse on a loaded small box)")
    serve.add_argument("--attention", default=None,
                       help="the engine's attention backend: auto (default: the fastest exact one, measured at "
                            "warm-up), sdpa, matmul, flash, fa3 (FlashAttention-3; the gpu extra), fp8 (FA3 FP8 with "
                            "an e4m3 KV cache: lossy, see docs/performance.md), fp8_triton")
    serve.add_argument("--pace-profile", default=None, metavar="FILE",
                       help="rehearsal: pace every engine step to a measured cost profile (the calibration of a "
                            "replay-compare JSON, e.g. one made on a GPU), so admission and scheduling meet that "
                            "machine's costs while a small model (tiny) does the real work here")
    serve.add_argument("--pace-scale", type=float, default=None, metavar="F",
                       help="rehearsal: the pace profile's compute times F (transfers as measured), e.g. 0.62 for "
                            "an engine at 0.62 of the profiled cost (default 1)")
    serve.add_argument("--strategy", default=None, metavar="FILE",
                       help="an execution-strategy file (TOML or JSON; examples in strategies/): where each stage "
                            "runs (decoder in line, on its own CUDA stream or another device) and how many engine "
                            "replicas share the device; checked before anything starts")
    serve.add_argument("--policy", default=None,
                       help="admission policy: duty (default: admits what it can serve within the objectives, by "
                       "the measured cost), kv (KV pool only), one-per-gpu, fifo")
    serve.add_argument("--admission-margin", type=float, default=None,
                       help="cost-model policies plan for at most 1 - margin of the engine's time; the margin is "
                       "measured online (a quantile of the cost model's overrun) and this is its prior (default 0.15)")
    serve.add_argument("--objective-world-miss-rate", type=float, default=None,
                       help="world objective: share of frames allowed after their playback deadline (default 0.01)")
    serve.add_argument("--objective-world-a2p-p95-ms", type=float, default=None,
                       help="world objective: action-to-photon p95 in ms (default 1500)")
    serve.add_argument("--objective-director-start-delay-p95-s", type=float, default=None,
                       help="director objective: from `direct` until playback may start, p95 (default 1.5)")
    serve.add_argument("--objective-director-risk", type=float, default=None,
                       help="director: share of segments allowed to miss their start delay or stall (default 0.05)")
    serve.add_argument("--admission-wait-s", type=float, default=None,
                       help="one-per-gpu: how long a create waits in the FIFO for a slot before its 503 (default 20)")
    serve.add_argument("--calibration-budget-s", type=float, default=None,
                       help="duty/fifo/one-per-gpu: most seconds of the start-up cost profile (default 60)")
    serve.add_argument("--start-history", default=None, metavar="FILE",
                       help="this machine's earlier starts, so that a verdict at its edge stays the same from start to "
                       "start (default $SESSIOND_START_HISTORY, else ~/.cache/sessiond/starts.jsonl; off: none)")
    serve.add_argument("--record", default=None, metavar="TRACE",
                       help="write the traffic of this run as a recorded trace (docs/traces.md) at shutdown")
    serve.add_argument("--webrtc-hosts", default=None,
                       help="comma-separated addresses WebRTC may offer as ICE host candidates (e.g. 127.0.0.1)")
    serve.add_argument("--cors-origins", default=None, metavar="ORIGINS",
                       help="comma-separated origins whose pages may call this daemon from the browser, e.g. a "
                       "fleet gateway's http://host:8000 (default: same origin only)")
    serve.add_argument("--api-keys", default=None, metavar="FILE",
                       help="require an API key (X-API-Key) to create sessions; FILE holds their hashes and "
                       "per-key session limits (`sessiond api-key add` writes it; default: no keys needed)")
    serve.add_argument("--web-dir", default=None, help="folder of the web client served at / (default: web/)")
    fleet = serve.add_argument_group("fleet worker (needs the `fleet` extra and --redis-url)")
    fleet.add_argument("--fleet", action="store_true",
                       help="join a fleet: register with the Dynamo runtime, publish capacity, drain on SIGTERM")
    fleet.add_argument("--discovery", choices=("file", "etcd"), default="file",
                       help="file: one host (a shared directory); etcd: many hosts")
    fleet.add_argument("--discovery-dir", default="/tmp/sessiond-discovery",
                       help="file discovery: the directory every worker and gateway on the host shares")
    fleet.add_argument("--etcd", default=None, help="etcd discovery: endpoints, e.g. http://10.0.0.5:2379")
    fleet.add_argument("--rpc-host", default=None,
                       help="the address the runtime's request plane binds and advertises (default: --host)")
    fleet.add_argument("--public-url", default=None,
                       help="this worker's public HTTP base, where clients' media connect (default http://HOST:PORT)")
    fleet.add_argument("--worker-key", default=None,
                       help="the worker's stable key, host/device (default: this host's name / the engine's device)")
    fleet.add_argument("--rack", default="", help="a failure domain label published with the capacity")
    fleet.add_argument("--checkpoint-s", type=float, default=5.0,
                       help="snapshot generating sessions this often, so a failover resumes from recent latents (5)")


def run(args: argparse.Namespace) -> int:
    from sessiond.api.listen import bind_listeners
    from sessiond.config import config_from_args
    from sessiond.errors import ServeConfigError

    if getattr(args, "start_history", None) is None:  # the user's history unless told otherwise
        from sessiond.admission.start_verdict import default_history_path

        args.start_history = os.environ.get("SESSIOND_START_HISTORY") or str(default_history_path())
    try:
        config = config_from_args(args)
        if config.strategy is not None:
            check_strategy(config)  # before the port, the engine or anything else starts
        # bound before the engine, the runtime or anything slow starts: a taken port ends this at once
        sockets = bind_listeners(config.host, config.port)
        if args.fleet:
            return _fleet(args, config, sockets)
        from sessiond.api.server import serve

        return serve(config, sockets)
    except ServeConfigError as exc:
        print(f"sessiond serve: {exc}", flush=True)
        return 2


def check_strategy(config: ServeConfig) -> None:
    """Load the strategy file and check it against this machine; StrategyError names the field."""
    from sessiond.runtime.engine_factory import machine_facts
    from sessiond.runtime.strategy import check_machine, load_strategy

    assert config.strategy is not None
    strategy = load_strategy(config.strategy)
    check_machine(strategy, machine_facts(config, strategy))


def _fleet(args: argparse.Namespace, config: ServeConfig, sockets: list[socket.socket]) -> int:
    from sessiond.fleet_adapter.serve import FleetOptions, run_fleet_worker
    from sessiond.logs import configure_logging

    configure_logging(config.log_json, config.log_level)
    options = FleetOptions(discovery=args.discovery, discovery_dir=args.discovery_dir, etcd=args.etcd,
                           rpc_host=args.rpc_host, public_url=args.public_url, worker_key=args.worker_key,
                           rack=args.rack, checkpoint_s=args.checkpoint_s)
    return run_fleet_worker(config, options, sockets)
