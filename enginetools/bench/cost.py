"""The cost of a media second per speed lever and workload, levers alone and stacked, in alternating
rounds, in one run.

    python -m enginetools.bench.cost --model wan-1.3b-world-preview --geometries world \
        --levers base,fa3,fp8,fp8+graphs --batch 1,2,4 --rounds 3 --json cost.json --plot cost.png

Workloads: on the serving geometry (`--model`'s sink + window) `global` (fresh sessions, `--chunks`
chunks, every chunk in context; its first chunk gives the time to first frames) and `serving` (the
steady state); on the world geometry (`<model>-world` from the catalog, else sink 1 + window 2 chunks)
`first` (fresh sessions' first chunk, at the smallest batch: time to first frames) and `world` (the
steady state). Steady
rows fill the context untimed, then time `--steady-chunks` chunks per session.

Levers (enginetools.bench.levers): "base" or parts joined by "+" (fa3, fp8, fp8_triton, graphs,
fp8_ffn, fp8_proj, kv_last_pass, preview). One engine is built per geometry and KV precision (bf16,
and e4m3 for levers with `fp8`); each lever is switched on as its config fields switch it. Every
round runs every lever in the order named (base, lever, base, lever, ...); each lever's first round
is preceded by untimed warm chunks. Reported per lever and workload: the median over rounds, every
round's value and the spread (max - min); the lever table sets each lever against the one it adds its
last part to, and a gain counts only where it exceeds the larger spread (enginetools.bench.rounds).

Fidelity of each lossy lever against the exact bf16 path on the same seeds (enginetools.bench.fidelity).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from demo.registration import catalog_with_demo
from engine.attention_fa3 import FP8
from engine.catalog import ModelCatalog
from engine.config import ModelConfig
from engine.decoders import StreamingDecoder
from engine.engine import Engine
from engine.errors import ConfigError
from engine.weights import parse_dtype
from enginetools.bench.args import parse_batches
from enginetools.bench.fidelity import fidelity
from enginetools.bench.levers import Decoders, Lever, apply_lever
from enginetools.bench.report import provenance
from enginetools.bench.rounds import aggregate, lever_table
from enginetools.bench.run import kv_budget
from enginetools.bench.stats import Clock, progress
from enginetools.bench.workloads import Driver

__all__ = ["main", "run"]

MODULE = "enginetools.bench.cost"  # what `python -m` runs
GIB = 2**30
GEOMETRIES = ("serving", "world")
RECOMPILE_LIMIT = 64  # levers x batch sizes x precisions compile more variants of the block halves than 8


def _engine(config: ModelConfig, catalog: ModelCatalog, args: argparse.Namespace, precision: str) -> Engine:
    dtype = FP8 if precision == "fp8" else parse_dtype(None, torch.device(args.device))
    budget = kv_budget(config, dtype, max(args.batch), args.kv_budget_gib)
    progress(f"building {config.name} ({precision} KV), KV pool {budget / GIB:.1f} GiB")
    engine = Engine.create(model=config, device=args.device, kv_budget_bytes=budget,
                           attention="fp8" if precision == "fp8" else "sdpa", max_batch=max(args.batch), catalog=catalog)
    engine.warmup()
    return engine


def _run_workloads(args: argparse.Namespace, driver: Driver, geometry: str, lever: Lever, warm: bool
                   ) -> dict[str, dict[str, object]]:
    engine = driver.engine
    out: dict[str, dict[str, object]] = {}
    for batch in args.batch:
        if warm:  # every (batch, context) bucket before timing; graphs capture on a bucket's second call
            for _ in range(2 if lever.has("graphs") else 1):
                driver.warm(batch, engine.config.context_chunks + 1)
        if geometry == "serving":
            out[f"global/{batch}"] = driver.run_global(batch, args.chunks).summary()
            out[f"serving/{batch}"] = driver.run_rolling(batch, args.steady_chunks).summary()
        else:
            if batch == min(args.batch):  # time to first frames: at the smallest batch only
                out[f"first/{batch}"] = driver.run_global(batch, 1).summary()
            out[f"world/{batch}"] = driver.run_rolling(batch, args.steady_chunks).summary()
    for key, summary in out.items():
        phases = summary["phases"]
        assert isinstance(phases, dict)
        progress(f"{lever.name:>24} {key:>10}: {summary['gpu_s_per_media_s']:.3f} GPU s per media s, "
                 f"{summary['fps_aggregate']:.1f} frames/s, phases p50 "
                 + ", ".join(f"{p} {v['p50_ms']:.1f} ms" for p, v in phases.items()))
    return out


def _geometry_models(base: ModelConfig, catalog: ModelCatalog) -> dict[str, ModelConfig]:
    """The serving geometry (`base`) and the world geometry: `<name>-world` (before any "-preview")
    from the catalog when it has one, else `base` at sink 1 + window 2 chunks under that name."""
    stem, preview = (base.name.removesuffix("-preview"), "-preview") if base.name.endswith("-preview") else (base.name, "")
    if stem.endswith("-world"):
        return {"world": base}
    world = f"{stem}-world{preview}"
    if world in catalog.names():
        return {"serving": base, "world": catalog.config(world)}
    return {"serving": base, "world": base.with_overrides(name=world, sink_chunks=1, window_chunks=2)}


def _preview(engine: Engine, catalog: ModelCatalog) -> StreamingDecoder | None:
    if engine.config.decoder_kind == "taehv":
        return engine.parts.decoder
    try:
        return catalog.build_decoder(engine.config.with_overrides(decoder_kind="taehv"), engine.device,
                                     engine.parts.dtype)
    except ConfigError as exc:  # e.g. the tiny model's latents
        progress(f"no preview decoder for {engine.config.name}: {exc}")
        return None


def _set_recompile_limit() -> None:
    import torch._dynamo

    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(RECOMPILE_LIMIT, getattr(torch._dynamo.config, name)))


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, object]:
    _set_recompile_limit()
    catalog = catalog_with_demo()
    levers = [Lever.parse(name) for name in args.levers]
    profiled = [Lever.parse(name) for name in args.profile_levers]
    results: dict[str, object] = {"provenance": provenance(torch.device(args.device), MODULE, argv),
                                  "levers_asked": args.levers, "rounds_asked": args.rounds}
    geometries = {g: c for g, c in _geometry_models(catalog.config(args.model), catalog).items() if g in args.geometries}
    if not geometries:
        raise ConfigError("no_geometry", f"--geometries {args.geometries} names none of {args.model}'s")
    precisions = sorted({"bf16", *(lever.precision for lever in levers + profiled)})
    engines: dict[tuple[str, str], Engine] = {}
    decoders: dict[tuple[str, str], Decoders] = {}
    info: dict[str, object] = {}
    for geometry, config in geometries.items():
        for precision in precisions:
            start = time.perf_counter()
            engine = engines[geometry, precision] = _engine(config, catalog, args, precision)
            decoders[geometry, precision] = Decoders(engine.parts.decoder, _preview(engine, catalog))
            info[f"{geometry}/{precision}"] = {
                "model": config.name, "sink_chunks": config.sink_chunks, "window_chunks": config.window_chunks,
                "attention": engine.parts.attend.name, "kv_dtype": engine.info.kv_dtype,
                "kv_bytes_per_session": engine.info.kv_bytes_per_session,
                "kv_pool_bytes": engine.kv_stats().slab_bytes * engine.kv_stats().slabs_total,
                "build_and_warmup_s": time.perf_counter() - start}
    results["engines"] = info
    if args.fidelity_seeds:  # before the rounds: short, and what a run cut short must not lose
        fidelity_geometry = next(iter(geometries))
        layers = engines[fidelity_geometry, "bf16"].config.num_layers
        results["fidelity"] = fidelity(
            {p: engines[fidelity_geometry, p] for p in precisions}, {p: decoders[fidelity_geometry, p] for p in precisions},
            levers, args.chunks, list(range(args.fidelity_seeds)), (0, layers // 2, max(0, layers - 2)))
        results["fidelity_geometry"] = fidelity_geometry
        _write(args, results)
    rounds: list[dict[str, dict[str, dict[str, object]]]] = []
    results["rounds"] = rounds
    for index in range(args.rounds):
        this: dict[str, dict[str, dict[str, object]]] = {}
        rounds.append(this)
        for lever in levers:
            for geometry in geometries:
                engine = engines[geometry, lever.precision]
                apply_lever(engine, lever, decoders[geometry, lever.precision])
                driver = Driver(engine, Clock(engine.device), catalog)
                this.setdefault(lever.name, {}).update(_run_workloads(args, driver, geometry, lever, warm=index == 0))
        results["levers"] = aggregate(rounds)
        results["lever_table"] = lever_table(results["levers"])  # type: ignore[arg-type]
        progress(f"round {index + 1}/{args.rounds} done")
        _write(args, results)
    if args.profile_levers:
        results["profiles"] = _profiles(args, engines, decoders, catalog, profiled)
    _write(args, results)
    return results


def _profiles(args: argparse.Namespace, engines: dict[tuple[str, str], Engine], decoders: dict[tuple[str, str], Decoders],
              catalog: ModelCatalog, levers: list[Lever]) -> dict[str, object]:
    """One steady chunk of one session per lever under the profiler (after the context is full and a
    chunk has run): per phase the GPU's busy and idle time and the busy time by kind of kernel, and
    the top ops by device time (enginetools.profile_ops)."""
    from enginetools.profile_ops import profile_call

    out: dict[str, object] = {}
    geometry = "world" if any(g == "world" for g, _ in engines) else "serving"
    for lever in levers:
        engine = engines[geometry, lever.precision]
        apply_lever(engine, lever, decoders[geometry, lever.precision])
        driver = Driver(engine, Clock(engine.device), catalog)
        with driver.sessions(1) as ids, tempfile.TemporaryDirectory() as scratch:
            for _ in range(engine.config.context_chunks + 2):  # full context, then one steady chunk untimed
                driver.chunk(ids, None)
            def one_chunk(ids: list[str] = ids, driver: Driver = driver) -> None:
                driver.chunk(ids, None)

            profile = profile_call(one_chunk, engine.device, Path(scratch) / "ops.txt")
        gpu_time = profile.get("gpu_time", {})
        phases = gpu_time.get("phases") if isinstance(gpu_time, dict) else None
        out[lever.name] = {"geometry": geometry, "gpu_time": phases, "phases": profile.get("phases"),
                           "top_ops": profile.get("top_ops")}
        progress(f"profile {lever.name}: {json.dumps(phases, default=str)[:1500]}")
    return out


def _write(args: argparse.Namespace, results: dict[str, object]) -> None:
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=1, default=str) + "\n")


def plot(results: dict[str, object], path: str) -> None:
    """Bars of GPU s per media s (median over rounds, whiskers at the rounds' min and max): one group
    per lever, one bar per workload and batch."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    levers = results["levers"]
    assert isinstance(levers, dict)
    workloads = list(dict.fromkeys(key for per_lever in levers.values() for key in per_lever))
    fig, ax = plt.subplots(figsize=(max(8.0, 1.2 * len(levers) * len(workloads) / 3), 4.0), dpi=110)
    width = 0.8 / len(workloads)
    names = list(levers)
    for i, workload in enumerate(workloads):
        rows = [levers[n].get(workload, {}) for n in names]
        values = [row.get("gpu_s_per_media_s") or float("nan") for row in rows]
        low = [v - (row.get("min") or v) for v, row in zip(values, rows, strict=True)]
        high = [(row.get("max") or v) - v for v, row in zip(values, rows, strict=True)]
        workload_name, batch = workload.split("/")
        ax.bar([x + i * width for x in range(len(names))], values, width, yerr=[low, high], capsize=2,
               label=f"{workload_name} b={batch}")
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], names, rotation=20, fontsize=8)
    ax.set_ylabel("GPU s per media s")
    ax.axhline(1.0, color="grey", linewidth=0.6)
    ax.set_title(f"{results['provenance']['device_name']}: cost of a media second per lever", fontsize=9)  # type: ignore[index]
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="wan-1.3b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=parse_batches, default=[1])
    parser.add_argument("--geometries", default=",".join(GEOMETRIES), help="serving, world or both")
    parser.add_argument("--chunks", type=int, default=7, help="chunks of the global workload and fidelity rollout")
    parser.add_argument("--steady-chunks", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds over every lever")
    parser.add_argument("--levers", default="base,fa3,fp8,graphs",
                        help="comma-separated: base, or parts joined by + (fa3, fp8, fp8_triton, graphs, fp8_ffn, "
                             "fp8_proj, kv_last_pass, preview)")
    parser.add_argument("--fidelity-seeds", type=int, default=2)
    parser.add_argument("--kv-budget-gib", type=float, default=None,
                        help="KV pool per engine; default: room for the largest batch and the warm-up session")
    parser.add_argument("--profile-levers", default="",
                        help="levers to profile afterwards, one steady chunk each at b=1 (GPU busy/idle per phase)")
    parser.add_argument("--json", required=True)
    parser.add_argument("--plot", default=None)
    args = parser.parse_args(argv)
    args.levers = args.levers.split(",")
    args.profile_levers = [name for name in args.profile_levers.split(",") if name]
    args.geometries = [g for g in args.geometries.split(",") if g]
    problems = []
    for name in args.levers + args.profile_levers:
        try:
            Lever.parse(name)
        except ValueError as exc:
            problems.append(f"lever {name!r}: {exc}")
    problems += [f"unknown geometry {g!r} (serving, world)" for g in args.geometries if g not in GEOMETRIES]
    if args.rounds < 1 or args.steady_chunks < 1:
        problems.append("--rounds and --steady-chunks must be >= 1")
    if problems:
        parser.error("; ".join(problems))
    results = run(args, argv)
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
