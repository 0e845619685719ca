"""The cost of a media second per speed lever and workload, each lever alone and stacked, in one run.

    python -m enginetools.bench.cost --model wan-1.3b --json cost.json --plot cost.png

Workloads (b=1 by default, `--batch` for more): `global` (7 chunks, 81 frames, every chunk in
context), `serving` (the model's sink + window, steady state) and `world` (sink 1 + window 2
chunks, the `wan-1.3b-world` geometry, steady state). One engine per geometry is built; the levers
are switched on it between runs exactly as their config fields switch them at build time
(`apply_lever`). Levers: `graphs` (CUDA graphs), `fp8_attention`, `fp8_ffn`, `kv_last_pass`
(approximation), `preview` (the TAEHV-layout decoder), run in the order `--levers` names them;
then the stacks `--stacks` names: `stacked_all` (every lever asked for) and `stacked_chosen` (the
levers that lowered the world workload's GPU s per media s alone, at the first batch size).

Fidelity of each lossy lever against the exact bf16 path on the same seeds: an 81-frame rollout's
final latents per chunk (relative L2 error, cosine) and, for FP8 attention, the attention output
error on the model's real q/k/v (captured from a pass of the rollout).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from demo.registration import catalog_with_demo
from engine._graphs import PassGraphs, cuda_capturer, rerun_capturer
from engine.api import FrameAction
from engine.catalog import ModelCatalog
from engine.config import ModelConfig
from engine.decoders import StreamingDecoder
from engine.engine import Engine
from engine.errors import ConfigError
from engine.weights import parse_dtype
from enginetools.bench.args import parse_batches
from enginetools.bench.report import provenance
from enginetools.bench.run import kv_budget
from enginetools.bench.stats import Clock, progress
from enginetools.bench.workloads import Driver

__all__ = ["LEVERS", "Lever", "apply_lever", "main"]

MODULE = "enginetools.bench.cost"  # what `python -m` runs
GIB = 2**30
SINGLE = ("graphs", "fp8_attention", "fp8_ffn", "kv_last_pass", "preview")
LOSSY = ("fp8_attention", "fp8_ffn", "kv_last_pass")


@dataclass(frozen=True)
class Lever:
    name: str
    graphs: bool = False
    fp8_attention: bool = False
    fp8_ffn: bool = False
    kv_last_pass: bool = False
    preview: bool = False

    @classmethod
    def of(cls, name: str, parts: tuple[str, ...]) -> Lever:
        return cls(name, **{p: True for p in parts})


LEVERS = [Lever("base"), *(Lever.of(name, (name,)) for name in SINGLE)]


@dataclass
class _Decoders:
    exact: StreamingDecoder
    preview: StreamingDecoder | None = None


@dataclass
class _Bench:
    args: argparse.Namespace
    results: dict[str, object]
    catalog: ModelCatalog
    decoders: dict[str, _Decoders] = field(default_factory=dict)


def apply_lever(engine: Engine, lever: Lever, decoders: _Decoders) -> None:
    """Switch `engine` to `lever` as its config fields would have built it (cuda_graphs,
    attention='fp8', fp8_ffn, kv_from_last_pass, decoder_kind='taehv')."""
    parts, runner = engine.parts, engine.runner
    parts.attend.select("fp8" if lever.fp8_attention else "sdpa")
    model = parts.model
    if lever.fp8_ffn:
        model.quantize_ffn()
    else:
        for block in model.blocks:
            block.ffn_fp8 = None  # type: ignore[assignment]
    config = engine.config.with_overrides(kv_from_last_pass=lever.kv_last_pass, cuda_graphs=lever.graphs)
    engine.config = runner.config = parts.config = config
    capturer = cuda_capturer(engine.device) if engine.device.type == "cuda" else rerun_capturer
    runner.graphs = PassGraphs(model, parts.pool, parts.attend, parts.rope, capturer) if lever.graphs else None
    decoder = decoders.preview if lever.preview else decoders.exact
    assert decoder is not None
    parts.decoder = runner.decoder = decoder


def _engine(config: ModelConfig, catalog: ModelCatalog, args: argparse.Namespace) -> Engine:
    budget = kv_budget(config, parse_dtype(None, torch.device(args.device)), max(args.batch), args.kv_budget_gib)
    progress(f"building {config.name}, KV pool {budget / GIB:.1f} GiB")
    engine = Engine.create(model=config, device=args.device, kv_budget_bytes=budget, attention="sdpa",
                           max_batch=max(args.batch), catalog=catalog)
    engine.warmup()
    return engine


def _warm_lever(driver: Driver, lever: Lever, batch: int, chunks: int) -> None:
    """Every (batch, context) bucket before timing: FP8 kernels and recompiled block halves build
    on their first call; with graphs twice (a bucket captures on its second call)."""
    for _ in range(2 if lever.graphs else 1):
        driver.warm(batch, chunks)


def _run_workloads(bench: _Bench, engine: Engine, geometry: str, lever: Lever) -> dict[str, object]:
    args = bench.args
    driver = Driver(engine, Clock(engine.device), bench.catalog)
    out: dict[str, object] = {}
    for batch in args.batch:
        if geometry == "serving":
            _warm_lever(driver, lever, batch, args.chunks)
            run = driver.run_global(batch, args.chunks)
            out[f"global/{batch}"] = run.summary()
            run = driver.run_rolling(batch, args.steady_chunks)
            out[f"serving/{batch}"] = run.summary()
        else:
            _warm_lever(driver, lever, batch, engine.config.context_chunks + 1)
            run = driver.run_rolling(batch, args.steady_chunks)
            out[f"world/{batch}"] = run.summary()
    for key, summary in out.items():
        assert isinstance(summary, dict)
        progress(f"{lever.name:>15} {key:>10}: {summary['gpu_s_per_media_s']:.3f} GPU s per media s, "
                 f"{summary['fps_aggregate']:.1f} frames/s, phases p50 "
                 + ", ".join(f"{p} {v['p50_ms']:.1f} ms" for p, v in summary["phases"].items()))  # type: ignore[index, union-attr]
    return out


def _rollout(engine: Engine, chunks: int, seed: int, capture_at: int | None = None
             ) -> tuple[list[torch.Tensor], tuple[torch.Tensor, ...] | None]:
    """One session's clean latents per chunk; with `capture_at`, the q, k, v of the first
    attention call of that chunk's cache pass (layer 0)."""
    engine.open_session("fidelity", seed=seed, prompt="a stone bridge over a mountain river at dusk")
    captured: list[tuple[torch.Tensor, ...]] = []
    attend = engine.parts.attend
    original = attend._fn
    try:
        for index in range(chunks):
            engine.begin_chunk("fidelity", [FrameAction(keys=("w",), mouse=(4.0, 0.0))])
            while (phase := engine.next_phase("fidelity")) is not None:
                if index == capture_at and phase.value == "cache" and not captured:
                    def spy(q, k, v, mask):  # type: ignore[no-untyped-def]
                        if not captured:
                            captured.append((q.clone(), k.clone(), v.clone()))
                        return original(q, k, v, mask)
                    attend._fn = spy
                from engine.api import StepItem, StepPlan

                result = engine.step(StepPlan((StepItem("fidelity", phase),))).results[0]
                attend._fn = original
                if result.error:
                    raise RuntimeError(result.error)
                if result.chunk is not None:
                    engine.mark_delivered("fidelity", result.chunk_index)
        state = engine.session("fidelity")
        latents = [state.records[i].latents.float().cpu() for i in range(chunks)]
    finally:
        attend._fn = original
        engine.close_session("fidelity")
    return latents, captured[0] if captured else None


def _compare(exact: list[torch.Tensor], other: list[torch.Tensor]) -> dict[str, list[float]]:
    rel = [float((o - e).norm() / e.norm()) for e, o in zip(exact, other, strict=True)]
    cos = [float(F.cosine_similarity(o.flatten(), e.flatten(), dim=0)) for e, o in zip(exact, other, strict=True)]
    return {"rel_l2_per_chunk": rel, "cosine_per_chunk": cos}


def _fidelity(bench: _Bench, engine: Engine, decoders: _Decoders) -> dict[str, object]:
    args = bench.args
    seeds = list(range(args.fidelity_seeds))
    out: dict[str, object] = {"chunks": args.chunks, "seeds": seeds}
    apply_lever(engine, Lever("base"), decoders)
    exact = [_rollout(engine, args.chunks, seed, capture_at=3) for seed in seeds]
    for name in (n for n in LOSSY if n in args.levers):
        apply_lever(engine, Lever.of(name, (name,)), decoders)
        per_seed = [_compare(exact[i][0], _rollout(engine, args.chunks, seed)[0]) for i, seed in enumerate(seeds)]
        out[name] = {"per_seed": per_seed,
                     "worst_rel_l2": max(max(s["rel_l2_per_chunk"]) for s in per_seed),
                     "worst_cosine": min(min(s["cosine_per_chunk"]) for s in per_seed)}
        progress(f"fidelity {name}: worst rel L2 {out[name]['worst_rel_l2']:.4f}, "  # type: ignore[index]
                 f"worst cosine {out[name]['worst_cosine']:.5f}")  # type: ignore[index]
    qkv = exact[0][1]
    if qkv is not None:
        from engine.attention_fp8 import fp8_attention

        q, k, v = qkv
        ref = F.scaled_dot_product_attention(q.float().transpose(1, 2), k.float().transpose(1, 2),
                                             v.float().transpose(1, 2)).transpose(1, 2)
        bf16 = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
        out["attention_output_error"] = {
            "shape_q_kv": [list(q.shape), list(k.shape)],
            "fp8": _compare([ref.cpu()], [fp8_attention(q, k, v).float().cpu()]),
            "bf16_sdpa": _compare([ref.cpu()], [bf16.float().cpu()]),
        }
    apply_lever(engine, Lever("base"), decoders)
    return out


def _geometry_models(base: ModelConfig, catalog: ModelCatalog) -> dict[str, ModelConfig]:
    """The serving geometry (`base`) and the world geometry: `<name>-world` from the catalog when
    it has one, else `base` at sink 1 + window 2 chunks under that name."""
    world = f"{base.name}-world"
    if world in catalog.names():
        return {"serving": base, "world": catalog.config(world)}
    return {"serving": base, "world": base.with_overrides(name=world, sink_chunks=1, window_chunks=2)}


def _chosen(levers: dict[str, dict[str, object]], batch: int) -> tuple[str, ...]:
    key = f"world/{batch}"
    base = levers["base"][key]["gpu_s_per_media_s"]  # type: ignore[index]
    return tuple(n for n in SINGLE if n in levers and levers[n][key]["gpu_s_per_media_s"] < base)  # type: ignore[index, operator]


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, object]:
    catalog = catalog_with_demo()
    base = catalog.config(args.model)
    results: dict[str, object] = {"provenance": provenance(torch.device(args.device), MODULE, argv)}
    bench = _Bench(args, results, catalog)
    levers_out: dict[str, dict[str, object]] = {}
    results["levers"] = levers_out
    engines = {}
    for geometry, config in _geometry_models(base, catalog).items():
        start = time.perf_counter()
        engine = _engine(config, catalog, args)
        exact = engine.parts.decoder
        try:
            preview: StreamingDecoder | None = catalog.build_decoder(
                engine.config.with_overrides(decoder_kind="taehv"), engine.device, engine.parts.dtype)
        except ConfigError as exc:  # e.g. the tiny model's latents
            progress(f"no preview decoder for {config.name}: {exc}")
            preview = None
        bench.decoders[geometry] = _Decoders(exact, preview)
        engines[geometry] = engine
        results.setdefault("engines", {})[geometry] = {  # type: ignore[index]
            "model": config.name, "sink_chunks": engine.config.sink_chunks, "window_chunks": engine.config.window_chunks,
            "build_and_warmup_s": time.perf_counter() - start,
        }
    available = [n for n in SINGLE if n in args.levers and (n != "preview" or bench.decoders["serving"].preview)]
    by_name = {lever.name: lever for lever in LEVERS}
    wanted = [by_name[n] for n in args.levers if n == "base" or n in available]  # in the order asked
    stacks = [("stacked_all", tuple(available))] if "all" in args.stacks else []
    for lever in wanted:
        for geometry, engine in engines.items():
            apply_lever(engine, lever, bench.decoders[geometry])
            levers_out.setdefault(lever.name, {}).update(_run_workloads(bench, engine, geometry, lever))
        _write(args, results)
    if "base" in levers_out and "chosen" in args.stacks:
        stacks.append(("stacked_chosen", _chosen(levers_out, args.batch[0])))
    for name, parts in stacks:
        lever = Lever.of(name, parts)
        results.setdefault("stacks", {})[name] = list(parts)  # type: ignore[index]
        for geometry, engine in engines.items():
            apply_lever(engine, lever, bench.decoders[geometry])
            levers_out.setdefault(name, {}).update(_run_workloads(bench, engine, geometry, lever))
        _write(args, results)
    if args.fidelity_seeds:
        results["fidelity"] = _fidelity(bench, engines["serving"], bench.decoders["serving"])
    _write(args, results)
    return results


def _write(args: argparse.Namespace, results: dict[str, object]) -> None:
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=1, default=str) + "\n")


def plot(results: dict[str, object], path: str) -> None:
    """Bars of GPU s per media s: one group per lever, one bar per workload and batch."""
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
        values = [levers[n].get(workload, {}).get("gpu_s_per_media_s", float("nan")) for n in names]
        workload_name, batch = workload.split("/")
        ax.bar([x + i * width for x in range(len(names))], values, width, label=f"{workload_name} b={batch}")
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
    parser.add_argument("--chunks", type=int, default=7, help="chunks of the global workload and fidelity rollout")
    parser.add_argument("--steady-chunks", type=int, default=4)
    parser.add_argument("--levers", default=",".join(lever.name for lever in LEVERS))
    parser.add_argument("--stacks", default="all,chosen",
                        help="stacks to run after the single levers: all (every lever asked for), chosen (those "
                             "that lowered the world workload alone); empty for none")
    parser.add_argument("--fidelity-seeds", type=int, default=2)
    parser.add_argument("--kv-budget-gib", type=float, default=None,
                        help="KV pool per engine; default: room for the largest batch and the warm-up session")
    parser.add_argument("--json", required=True)
    parser.add_argument("--plot", default=None)
    args = parser.parse_args(argv)
    args.levers = args.levers.split(",")
    args.stacks = [name for name in args.stacks.split(",") if name]
    unknown = sorted({*args.levers} - {lever.name for lever in LEVERS}) + sorted({*args.stacks} - {"all", "chosen"})
    if unknown:
        parser.error(f"unknown lever or stack {', '.join(unknown)}; levers: "
                     f"{', '.join(lever.name for lever in LEVERS)}; stacks: all, chosen")
    results = run(args, argv)
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
