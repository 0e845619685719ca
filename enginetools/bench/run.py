"""Engine benchmark: per batch size, phase times, frames/s, first-frame latency, memory, TFLOP/s.

    python -m enginetools.bench --model tiny|wan-1.3b --batch 1,2,4,8 --json out.json
        [--device cuda] [--chunks 7] [--window SINK,WINDOW] [--mixed-context]
        [--profile top_ops.txt] [--plot fps.png]

Drives `engine.Engine` through its public API (open_session, begin_chunk, next_phase, step,
mark_delivered) exactly as the scheduler does; workloads are described in
`enginetools.bench.workloads`, FLOP counts in `enginetools.bench.flops`. Needs only torch, numpy,
safetensors and msgpack. Progress goes to stderr, a summary table to stdout.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import torch

from demo.registration import catalog_with_demo
from engine.catalog import ModelCatalog
from engine.config import ModelConfig
from engine.engine import Engine
from engine.errors import ConfigError, EngineError
from engine.kv import SlabGeometry
from engine.weights import parse_dtype
from enginetools.bench.args import add_arguments
from enginetools.bench.flops import DIT_FLOP_FORMULA, decoder_chunk_flops, dit_pass_flops
from enginetools.bench.report import REFERENCE, check_targets, provenance
from enginetools.bench.stats import Clock, progress
from enginetools.bench.workloads import Driver

__all__ = ["kv_budget", "main", "run_bench"]

MODULE = "enginetools.bench"  # what `python -m` runs
GIB = 2**30
TERA = 1e12
WARMUP_CHUNKS = 2  # untimed chunks per batch size before the global workload: a first and a steady chunk


def _variant(config: ModelConfig, sink: int, window: int) -> ModelConfig:
    """`config` with another sink/window, under a derived name (itself when they are its own)."""
    if (sink, window) == (config.sink_chunks, config.window_chunks):
        return config
    name = f"{config.name}@sink{sink}-window{window}"
    return config.with_overrides(name=name, sink_chunks=sink, window_chunks=window)


def kv_budget(config: ModelConfig, dtype: torch.dtype, sessions: int, gib: float | None) -> int:
    """`gib` GiB, or (None) room for `sessions` sessions and the warm-up one at the full context."""
    if gib is not None:
        return int(gib * GIB)
    slab = SlabGeometry(config.num_layers, config.tokens_per_chunk, config.num_heads, config.head_dim, dtype)
    per_session = config.context_chunks + config.max_rollback_chunks
    return slab.slab_bytes * per_session * (sessions + 1)


def _engine(
    args: argparse.Namespace, config: ModelConfig, catalog: ModelCatalog, device: str
) -> tuple[Engine, dict[str, object]]:
    dtype = parse_dtype(args.dtype, torch.device(device))
    budget = kv_budget(config, dtype, max(args.batch), args.kv_budget_gib)
    progress(f"building {config.name} on {device} ({dtype}), KV pool {budget / GIB:.2f} GiB")
    start = time.perf_counter()
    engine = Engine.create(
        model=config,
        catalog=catalog,
        device=device,
        dtype=args.dtype,
        weights=args.weights,
        kv_budget_bytes=budget,
        attention=args.attention,
        decoder_weights=args.vae_weights,
    )
    built = time.perf_counter() - start
    engine.warmup()
    warm = time.perf_counter() - start - built
    progress(f"engine ready: built in {built:.1f}s, warmed up in {warm:.1f}s")
    stats = engine.kv_stats()
    decoder = engine.parts.decoder
    cache_bytes = getattr(decoder, "cache_bytes", None)
    return engine, {
        "model": config.name,
        "info": {**engine.info.__dict__, "action_space": engine.info.action_space.to_json()},
        "sink_chunks": config.sink_chunks,
        "window_chunks": config.window_chunks,
        "tokens_per_chunk": config.tokens_per_chunk,
        "decoder": {
            "kind": decoder.kind,
            "label": decoder.label,
            "layout": getattr(decoder, "layout", None),
            "cudnn_benchmark": getattr(decoder, "cudnn_benchmark", None),
            "fused_norm_silu": bool(getattr(decoder, "fused", False)),
            "conv_form_timings_s": getattr(decoder, "conv_form_timings", {}),
            "layout_timings_s": getattr(decoder, "layout_timings", None),
        },
        "decoder_cache_bytes_per_session": (
            cache_bytes(config.latent_height, config.latent_width, engine.parts.dtype)
            if cache_bytes
            else None
        ),
        "kv_pool_bytes": stats.slab_bytes * stats.slabs_total,
        "kv_slab_bytes": stats.slab_bytes,
        "attention_backend": engine.parts.attend.name,
        "attention_timings": getattr(engine.parts.attend, "timings", None),
        "build_s": built,
        "warmup_s": warm,
    }


def _workloads(args: argparse.Namespace) -> list[str]:
    names = list(args.workloads)
    if args.mixed_context and "mixed" not in names:
        names.append("mixed")
    return names


def _run_engine_workloads(
    args: argparse.Namespace, config: ModelConfig, catalog: ModelCatalog, device: str, names: list[str],
    results: dict[str, object],
) -> None:
    engine, setup = _engine(args, config, catalog, device)
    driver = Driver(engine, Clock(engine.device), catalog)
    results.setdefault("engines", {})[config.name] = setup  # type: ignore[index]
    workloads = results.setdefault("workloads", {})
    for name in names:
        runs: dict[int, dict[str, object]] = {}
        workloads[name] = runs  # type: ignore[index]
        for batch in args.batch:
            progress(f"{name}: batch {batch}")
            try:
                runs[batch] = _run_one(args, driver, name, batch, setup)
            except EngineError as exc:  # e.g. out of memory at a large batch: keep what was measured
                progress(f"{name} batch {batch} failed: {exc}")
                runs[batch] = {"workload": name, "batch": batch, "error": str(exc)}
                if engine.device.type == "cuda":
                    torch.cuda.empty_cache()
            else:
                _print_row(runs[batch])
            _write(args, results)
    table = _profile_path(args, engine.device)
    if table and "global" in names:
        from enginetools.profile_ops import profile_call

        batch = args.profile_batch or args.batch[0]
        progress(f"profiling the global workload at batch {batch} -> {table}")

        def profiled() -> None:
            driver.run_global(batch, args.chunks)

        try:
            results["profile"] = {"batch": batch, **profile_call(profiled, engine.device, table)}
        except EngineError as exc:
            results["profile"] = {"batch": batch, "error": str(exc)}


def _profile_path(args: argparse.Namespace, device: torch.device) -> str | None:
    """--profile, or on CUDA by default a table next to the results JSON: a GPU results file
    always says where the time goes."""
    if args.profile:
        return str(args.profile)
    if device.type == "cuda" and args.json_path:
        path = Path(args.json_path)
        return str(path.with_name(path.stem + "_top_ops.txt"))
    return None


def _run_one(
    args: argparse.Namespace, driver: Driver, name: str, batch: int, setup: dict[str, object]
) -> dict[str, object]:
    if name == "global":
        driver.warm(batch, min(args.chunks, WARMUP_CHUNKS))
        run = driver.run_global(batch, args.chunks)
    elif name == "rolling":
        run = driver.run_rolling(batch, args.steady_chunks)
    else:
        run = driver.run_mixed(batch, args.steady_chunks)
    summary = run.summary()
    summary["engine"] = setup["model"]
    summary["kv_bytes_per_session"] = driver.engine.info.kv_bytes_per_session
    if driver.engine.device.type == "cuda":  # the KV pool is preallocated: peak includes all of it
        summary["peak_memory_beyond_kv_pool_bytes"] = run.peak_memory_bytes - int(setup["kv_pool_bytes"])  # type: ignore[call-overload]
    return summary


def _write(args: argparse.Namespace, results: dict[str, object]) -> None:
    """(Re)write the results file: after every batch, so an interrupted run keeps what it measured."""
    if args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(json.dumps(results, indent=2, default=str) + "\n")


def _print_row(s: dict[str, object]) -> None:
    phases = s["phases"]
    assert isinstance(phases, dict)

    def p50(name: str) -> str:
        return f"{phases.get(name, {}).get('p50_ms', float('nan')):8.1f}"

    tflops = s["dit_achieved_tflops"]
    ttff = s["ttff_ms"]
    print(
        f"{s['workload']:>8} b={s['batch']:<2} fps {s['fps_aggregate']:7.2f} total "
        f"{s['fps_per_session_mean']:6.2f}/session  denoise p50{p50('denoise')} ms  cache p50{p50('cache')} ms"
        f"  decode p50{p50('decode')} ms  DiT {tflops if tflops is None else f'{tflops:6.1f}'} TFLOP/s"
        f"  first frames {ttff if ttff is None else f'{ttff:.0f} ms'}",
        flush=True,
    )


def run_bench(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    threads = torch.get_num_threads()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        return _run_bench(args, argv)
    finally:
        torch.set_num_threads(threads)


def _run_bench(args: argparse.Namespace, argv: list[str] | None) -> int:
    try:
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if torch.device(device).type == "cuda" and not torch.cuda.is_available():
            raise ConfigError(
                "bad_device", "--device cuda asked for, but CUDA is not available here; use --device cpu"
            )
        if args.chunks < 1 or args.steady_chunks < 1:
            raise ConfigError("bad_bench_args", "--chunks and --steady-chunks must be >= 1")
        catalog = catalog_with_demo()
        base = catalog.config(args.model)
        names = _workloads(args)
        # the global workload keeps every chunk in context: widen the window when it would wrap
        global_window = max(base.window_chunks, args.chunks - base.sink_chunks)
        sink, window = args.window or (base.sink_chunks, base.window_chunks)
        plans: dict[str, tuple[ModelConfig, list[str]]] = {}  # config name -> (config, workloads)
        global_config = _variant(base, base.sink_chunks, global_window)
        if "global" in names:
            plans.setdefault(global_config.name, (global_config, []))[1].append("global")
        for name in (n for n in names if n != "global"):
            config = _variant(base, sink, window)
            plans.setdefault(config.name, (config, []))[1].append(name)
        results: dict[str, object] = {"provenance": provenance(torch.device(device), MODULE, argv or sys.argv[1:])}
        results["flops"] = {
            "dit_pass_formula": DIT_FLOP_FORMULA,
            "dit_pass_tflop_by_chunk_global": [
                dit_pass_flops(global_config, k) / TERA for k in range(args.chunks)
            ],
            "decoder_tflop_first_chunk": _tera(decoder_chunk_flops(base, catalog, first=True)),
            "decoder_tflop_steady_chunk": _tera(decoder_chunk_flops(base, catalog, first=False)),
            "decoder_formula": "counted with torch.utils.flop_counter on the meta device",
        }
        for config, workload_names in plans.values():
            _run_engine_workloads(args, config, catalog, device, workload_names, results)
            if torch.device(device).type == "cuda":  # the next engine gets this one's memory
                gc.collect()
                torch.cuda.empty_cache()
        workloads = results.get("workloads", {})
        assert isinstance(workloads, dict)
        results["reference"] = REFERENCE
        results["targets"] = check_targets(workloads.get("global", {}))
    except EngineError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    if args.json_path:
        _write(args, results)
        progress(f"wrote {args.json_path}")
    if args.plot:
        from enginetools.bench.plot import plot_fps

        try:
            plot_fps(workloads, f"{args.model} on {results['provenance']['device_name']}", args.plot)  # type: ignore[index]
            progress(f"wrote {args.plot}")
        except ConfigError as exc:
            print(f"bench: {exc}", file=sys.stderr)
    return 0


def _tera(flops: float | None) -> float | None:
    return None if flops is None else flops / TERA


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run_bench(args, argv if argv is not None else sys.argv[1:])

