"""`sessiond replay-compare TRACE`: the same trace on the same engine under each admission policy."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from loadtest.replay.objective_flags import add_objective_flags

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, name: str) -> None:
    p = sub.add_parser(name, help="compare admission policies on one trace and one engine",
                       description="Build the engine once, calibrate its cost model, then for each policy run a "
                       "daemon with it in this process and replay the trace against it. Prints one row per "
                       "policy: admitted, rejected, failed, sessions within objective, p95s.")
    p.add_argument("trace", help="trace file (.jsonl)")
    p.add_argument("--model", default="tiny", help="model config (default tiny; wan-1.3b on a GPU)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present, else cpu)")
    p.add_argument("--policies", default="duty,one-per-gpu,fifo", help="comma-separated (default all three)")
    p.add_argument("--margin", type=float, default=0.15, help="duty policy: load must stay <= 1 - margin")
    p.add_argument("--max-batch", type=int, default=8, help="largest engine batch (default 8)")
    p.add_argument("--speed", type=float, default=1.0, help="trace time runs this much faster (default 1)")
    p.add_argument("--saturate", action="store_true", help="saturating replay (default paced)")
    add_objective_flags(p)
    p.add_argument("--priors-from-trace", action="store_true", help="take the duty priors from the trace")
    p.add_argument("--calibration-chunks", type=int, default=3,
                   help="chunks per calibration round (contexts 0..N-1); cover the model's window for steady costs")
    p.add_argument("--kv-budget-gib", type=float, default=None,
                   help="the engine's KV pool in GiB (default: the engine's own; leave room for activations)")
    p.add_argument("--out", default=None, metavar="DIR", help="write compare.json and per-policy reports and plots")


def run(args: argparse.Namespace) -> int:
    from engine.errors import EngineError
    from loadtest.replay.compare import CompareConfig, run_comparison
    from loadtest.replay.objective_flags import objectives_from
    from sessiond.admission.build import POLICIES
    from sessiond.admission.errors import AdmissionConfigError, CostModelError
    from sessiond.traces.errors import TraceError
    from sessiond.traces.format import load_trace

    policies = tuple(p for p in args.policies.split(",") if p)
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        print(f"replay-compare: --policies takes {', '.join(POLICIES)}; got {args.policies!r}", file=sys.stderr)
        return 2
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        trace = load_trace(args.trace)
    except OSError as exc:
        print(f"replay-compare: cannot read {args.trace}: {exc.strerror}", file=sys.stderr)
        return 2
    except TraceError as exc:
        print(f"replay-compare: {args.trace}: {exc}", file=sys.stderr)
        return 2
    try:
        cfg = CompareConfig(model=args.model, device=device, policies=policies, margin=args.margin,
                            max_batch=args.max_batch, speed=args.speed,
                            mode="saturating" if args.saturate else "paced",
                            objectives=objectives_from(args),
                            priors_from_trace=args.priors_from_trace, out_dir=args.out,
                            calibration_chunks=args.calibration_chunks,
                            kv_budget_bytes=None if args.kv_budget_gib is None else int(args.kv_budget_gib * 2**30))
        run_comparison(trace, cfg)
    except (AdmissionConfigError, CostModelError) as exc:
        print(f"replay-compare: {exc}", file=sys.stderr)
        return 2
    except EngineError as exc:  # e.g. an unknown model, or a KV pool that does not fit on the GPU
        print(f"replay-compare: {exc}", file=sys.stderr)
        return 2
    return 0
