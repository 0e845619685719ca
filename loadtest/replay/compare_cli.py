"""`sessiond replay-compare TRACE...`: the same traces on the same model under each admission policy,
each daemon a `sessiond serve` process of its own, the client this process."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from fleet.local import provenance
from loadtest.replay.objective_flags import add_objective_flags

__all__ = ["add_parser", "run", "trace_paths"]


def add_parser(sub: Any, name: str) -> None:
    p = sub.add_parser(name, help="compare admission policies on traces (a file, several, or a family's folder)",
                       description="For each policy start `sessiond serve` with it as its own process on a free "
                       "port (its own start-up calibration), replay every trace against it from this process, "
                       "then stop it. Prints per trace one row per policy (admitted, rejected, failed, within "
                       "and outside objective, p95s, share of director segments missed) and the analytic "
                       "capacity of the first cost-model daemon's calibration; with --out also compare.json, "
                       "family.md (one table for all traces), family.png and each replay's report and plots.")
    p.add_argument("traces", nargs="+", metavar="TRACE",
                   help="trace files (.jsonl) or folders of them (e.g. one `sessiond trace-gen family` wrote)")
    p.add_argument("--model", default="tiny", help="model config (default tiny; wan-1.3b on a GPU)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present, else cpu)")
    p.add_argument("--policies", default="duty,one-per-gpu,fifo", help="comma-separated (default all three)")
    p.add_argument("--margin", type=float, default=None,
                   help="the daemons' --admission-margin (default: the daemon's own)")
    p.add_argument("--max-batch", type=int, default=8, help="largest engine batch (default 8)")
    p.add_argument("--speed", type=float, default=1.0, help="trace time runs this much faster (default 1)")
    p.add_argument("--saturate", action="store_true", help="saturating replay (default paced)")
    add_objective_flags(p)
    p.add_argument("--cpu-threads", type=int, default=None, help="the daemons' --cpu-threads")
    p.add_argument("--serve-arg", action="append", default=[], metavar="FLAG",
                   help="a further `sessiond serve` flag for every daemon, e.g. --serve-arg=--lead-chunks=1 "
                   "(repeatable)")
    p.add_argument("--kv-budget-gib", type=float, default=None,
                   help="the engine's KV pool in GiB (default: the engine's own; leave room for activations)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write compare.json, family.md, family.png, the daemons' logs and each replay's report and plots")


def run(args: argparse.Namespace) -> int:
    from loadtest.replay.compare import CompareConfig, run_comparison
    from loadtest.replay.objective_flags import objectives_from
    from sessiond.admission.build import POLICIES
    from sessiond.admission.errors import AdmissionConfigError, CostModelError
    from sessiond.traces.errors import TraceError
    from sessiond.traces.format import Trace, load_trace

    policies = tuple(p for p in args.policies.split(",") if p)
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        print(f"replay-compare: --policies takes {', '.join(POLICIES)}; got {args.policies!r}", file=sys.stderr)
        return 2
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    traces: list[Trace] = []
    for path in trace_paths(args.traces):
        try:
            traces.append(load_trace(path))
        except OSError as exc:
            print(f"replay-compare: cannot read {path}: {exc.strerror}", file=sys.stderr)
            return 2
        except TraceError as exc:
            print(f"replay-compare: {path}: {exc}", file=sys.stderr)
            return 2
    if not traces:
        print(f"replay-compare: no .jsonl trace in {' '.join(args.traces)}", file=sys.stderr)
        return 2
    names = [t.header.name for t in traces]
    if len(set(names)) != len(names):
        print(f"replay-compare: two traces share a name ({', '.join(sorted(n for n in set(names) if names.count(n) > 1))}); "
              "each needs its own", file=sys.stderr)
        return 2
    try:
        cfg = CompareConfig(model=args.model, device=device, policies=policies, margin=args.margin,
                            max_batch=args.max_batch, speed=args.speed,
                            mode="saturating" if args.saturate else "paced",
                            objectives=objectives_from(args), out_dir=args.out, cpu_threads=args.cpu_threads,
                            serve_extra=tuple(args.serve_arg),
                            kv_budget_bytes=None if args.kv_budget_gib is None else int(args.kv_budget_gib * 2**30))
        started = provenance("sessiond replay-compare " + " ".join(sys.argv[2:]))
        run_comparison(traces, cfg)
        if args.out:  # where it ran: commit, CPU, the load average at the start and at the end
            Path(args.out, "provenance.json").write_text(
                json.dumps({**started, "load_avg_at_end": os.getloadavg()}, indent=2) + "\n")
    except (AdmissionConfigError, CostModelError) as exc:
        print(f"replay-compare: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # a daemon that exited or did not become ready (its log says why)
        print(f"replay-compare: {exc}", file=sys.stderr)
        return 1
    return 0


def trace_paths(items: list[str]) -> list[Path]:
    """The files named, and the .jsonl files of each folder named (sorted by name)."""
    out: list[Path] = []
    for item in items:
        path = Path(item)
        out += sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    return out
