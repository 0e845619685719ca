"""`python -m fleet.sim --workers 1000 --sessions 20000 --out DIR`: run the fleet simulation, print
progress and a summary, and write summary.json and plots (PNG) into DIR."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from fleet.sim.plots import write_plots
from fleet.sim.run import SimConfig, simulate


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fleet.sim", description=__doc__)
    p.add_argument("--workers", type=int, default=1000)
    p.add_argument("--sessions", type=int, default=20000)
    p.add_argument("--gateways", type=int, default=4)
    p.add_argument("--gpus-per-host", type=int, default=8)
    p.add_argument("--hosts-per-rack", type=int, default=5)
    p.add_argument("--arrival-s", type=int, default=300, help="sessions arrive uniformly over this ramp")
    p.add_argument("--world-share", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="directory for summary.json and the plots")
    args = p.parse_args(argv)
    config = SimConfig(workers=args.workers, sessions=args.sessions, gateways=args.gateways,
                       gpus_per_host=args.gpus_per_host, hosts_per_rack=args.hosts_per_rack,
                       arrival_s=args.arrival_s, world_share=args.world_share, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    result = simulate(config, progress=lambda line: print(f"[sim {time.monotonic() - started:6.1f}s] {line}", flush=True))
    summary = result.summary()
    summary["config"] = result.config
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    for name in write_plots(result, out):
        print(f"[sim] wrote {out / name}")
    print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
