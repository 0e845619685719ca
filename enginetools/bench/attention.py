"""Self-attention at the engine's shapes on a GPU: FlashAttention-3 (bf16 and FP8, uniform batches and
packed samples of different key lengths) against cuDNN's SDPA, each checked against an fp32
reference on fresh random inputs and timed; then, optionally, one batched denoise step of a real
engine over sessions at different context lengths under the profiler, to show which kernels ran.

    python -m enginetools.bench.attention --json attention.json [--batch 1,2,4] [--chunks 4,8]
        [--engine wan-1.3b-world-preview --engine-attention fa3,fp8]

Shapes: queries = one chunk (wan-1.3b: 4,680 tokens), keys = `chunks` chunks, 12 heads of 128.
FP8 inputs are quantized as the engine does (engine.model.kv_fp8: q and k scaled by their per-head
bound, k centred by its mean), so the error splits into the quantization's and the kernel's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.attention_fa3 import FP8, Descale, PackingCache, fa3_attention, fa3_module, reference_attention
from engine.config import wan_13b_config
from engine.model.kv_fp8 import FP8_MAX, to_e4m3
from enginetools.bench.args import parse_batches
from enginetools.bench.report import provenance
from enginetools.bench.stats import progress

__all__ = ["main"]

MODULE = "enginetools.bench.attention"


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref.float()).norm() / ref.float().norm())


def _inputs(batch: int, queries: int, keys: int, heads: int, dim: int, seed: int, device: torch.device
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """bf16 q, k, v with the model's character: unit-RMS q and k, k with a common offset per head."""
    gen = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(batch, queries, heads, dim, device=device, generator=gen)
    k = torch.randn(batch, keys, heads, dim, device=device, generator=gen)
    k = k + 0.5 * torch.randn(1, 1, heads, dim, device=device, generator=gen)
    v = torch.randn(batch, keys, heads, dim, device=device, generator=gen)
    return q.bfloat16(), k.bfloat16(), v.bfloat16()


def _quantized(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Descale]:
    """e4m3 q, k (centred by its mean), v with per-head scales from their peaks; and the Descale."""
    mean = k.float().mean(dim=(0, 1))
    qs, ks, vs = (x.float().abs().amax(dim=(0, 1, 3)) / FP8_MAX for x in (q, k.float() - mean, v))
    return to_e4m3(q, qs), to_e4m3(k, ks, mean), to_e4m3(v, vs), Descale(qs, ks, vs)


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """fp32 SDPA, (B, L, heads, d)."""
    out = F.scaled_dot_product_attention(q.float().transpose(1, 2), k.float().transpose(1, 2),
                                         v.float().transpose(1, 2))
    return out.transpose(1, 2)


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)


def _median_ms(fn: Callable[[], object]) -> float:
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))


def checks(device: torch.device, tokens: int, heads: int, dim: int) -> dict[str, object]:
    """Errors against fp32 on fresh inputs: uniform and packed, bf16 and FP8; packed equals uniform."""
    module = fa3_module()
    assert module is not None
    out: dict[str, object] = {}
    q, k, v = _inputs(2, tokens, 4 * tokens, heads, dim, seed=1, device=device)
    ref = _reference(q, k, v)
    out["sdpa_bf16_rel_l2"] = _rel(_sdpa(q, k, v), ref)
    out["fa3_bf16_rel_l2"] = _rel(fa3_attention(module, q, k, v), ref)
    q8, k8, v8, descale = _quantized(q, k, v)
    fp8 = fa3_attention(module, q8, k8, v8, descale)
    out["fa3_fp8_rel_l2"] = _rel(fp8, ref)
    out["fa3_fp8_vs_reference_on_e4m3_rel_l2"] = _rel(fp8, reference_attention(q8, k8, v8, descale))
    # packed: three samples with 1, 2 and 4 chunks of keys in one call
    chunks = [1, 2, 4]
    samples = [_inputs(1, tokens, n * tokens, heads, dim, seed=10 + n, device=device) for n in chunks]
    packing = PackingCache(device).get([tokens] * 3, [n * tokens for n in chunks])
    qp = torch.cat([s[0][0] for s in samples])
    kp, vp = (torch.cat([s[i][0] for s in samples]) for i in (1, 2))
    packed = fa3_attention(module, qp, kp, vp, packing=packing).view(3, tokens, heads, dim)
    out["fa3_bf16_packed_rel_l2"] = [_rel(packed[i], _reference(*s)[0]) for i, s in enumerate(samples)]
    out["fa3_bf16_packed_max_abs_vs_uniform"] = max(
        float((packed[i] - fa3_attention(module, *s)[0]).abs().max()) for i, s in enumerate(samples))
    q8p, k8p, v8p, dp = _quantized(qp[None], kp[None], vp[None])
    packed8 = fa3_attention(module, q8p[0], k8p[0], v8p[0], dp, packing).view(3, tokens, heads, dim)
    starts = [0, tokens, 3 * tokens, 7 * tokens]
    out["fa3_fp8_packed_rel_l2"] = [
        _rel(packed8[i], _reference(samples[i][0], kp[None, starts[i] : starts[i + 1]], vp[None, starts[i] : starts[i + 1]])[0])
        for i in range(3)]
    return out


def timings(device: torch.device, batches: list[int], chunk_counts: list[int], tokens: int, heads: int, dim: int
            ) -> list[dict[str, object]]:
    """Median ms per call: SDPA (the engine's default), FA3 bf16 and FP8, uniform and through the
    packed interface, and the K/V concatenation the engine does per layer, bf16 against e4m3."""
    module = fa3_module()
    assert module is not None
    cache = PackingCache(device)
    rows: list[dict[str, object]] = []
    for chunks in chunk_counts:
        for batch in batches:
            q, k, v = _inputs(batch, tokens, chunks * tokens, heads, dim, seed=100 + batch * chunks, device=device)
            q8, k8, v8, descale = _quantized(q, k, v)
            flops = 4 * batch * tokens * chunks * tokens * dim * heads
            packing = cache.get([tokens] * batch, [chunks * tokens] * batch)
            qf, kf, vf, q8f, k8f, v8f = (x.reshape(-1, heads, dim) for x in (q, k, v, q8, k8, v8))
            row: dict[str, object] = {"batch": batch, "key_chunks": chunks}
            row["sdpa_bf16_ms"] = _median_ms(lambda: _sdpa(q, k, v))  # noqa: B023
            row["fa3_bf16_ms"] = _median_ms(lambda: fa3_attention(module, q, k, v))  # noqa: B023
            row["fa3_bf16_packed_ms"] = _median_ms(lambda: fa3_attention(module, qf, kf, vf, packing=packing))  # noqa: B023
            row["fa3_fp8_ms"] = _median_ms(lambda: fa3_attention(module, q8, k8, v8, descale))  # noqa: B023
            row["fa3_fp8_packed_ms"] = _median_ms(lambda: fa3_attention(module, q8f, k8f, v8f, descale, packing))  # noqa: B023
            for name in ("sdpa_bf16", "fa3_bf16", "fa3_fp8"):
                row[f"{name}_tflops"] = flops / (row[f"{name}_ms"] * 1e-3) / 1e12  # type: ignore[operator]
            parts_bf16 = [k[i] for i in range(batch)]
            parts_fp8 = [k8.view(torch.uint8)[i] for i in range(batch)]
            row["kv_concat_bf16_ms"] = 2 * _median_ms(lambda: torch.cat(parts_bf16))  # noqa: B023
            row["kv_concat_fp8_ms"] = 2 * _median_ms(lambda: torch.cat(parts_fp8))  # noqa: B023
            rows.append(row)
            progress("attention " + ", ".join(f"{key} {value:.3f}" if isinstance(value, float) else f"{key} {value}"
                                              for key, value in row.items()))
    return rows


def mixed_batch_profile(model: str, attention: str, device: torch.device) -> dict[str, object]:
    """One batched denoise step of `model` over three sessions at 0, 1 and the full number of
    context chunks, under the profiler: self-attention kernel names and counts."""
    from demo.registration import catalog_with_demo
    from engine.api import FrameAction, Phase, StepItem, StepPlan
    from engine.engine import Engine
    from enginetools.bench.run import kv_budget

    catalog = catalog_with_demo()
    config = catalog.config(model)
    budget = kv_budget(config, FP8 if attention == "fp8" else torch.bfloat16, 4, None)
    engine = Engine.create(model=model, device=str(device), attention=attention, max_batch=3,
                           kv_budget_bytes=budget, catalog=catalog, compile="off")  # eager: which kernels, not how fast
    engine.warmup()
    histories = {"a": 0, "b": 1, "c": config.context_chunks}
    for sid, n in histories.items():
        engine.open_session(sid, seed=len(sid), prompt="a path through a forest")
        for _ in range(n):
            engine.begin_chunk(sid, [FrameAction()])
            while (phase := engine.next_phase(sid)) is not None:
                engine.step(StepPlan((StepItem(sid, phase),)))
        engine.begin_chunk(sid, [FrameAction()])
    plan = StepPlan(tuple(StepItem(sid, Phase.DENOISE) for sid in histories))
    engine.step(plan)  # the packed shapes once before the profile
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        result = engine.step(plan)
    kernels = Counter(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    attention_kernels = {name: n for name, n in kernels.items()
                         if any(s in name.lower() for s in ("flash", "fmha", "cudnn", "attention", "sdpa"))}
    return {"model": model, "attention": engine.parts.attend.name, "kv_dtype": engine.info.kv_dtype,
            "kv_bytes_per_session": engine.info.kv_bytes_per_session, "errors": [r.error for r in result.results if r.error],
            "step_seconds": result.seconds, "attention_kernels": attention_kernels, "layers": config.num_layers}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=parse_batches, default=[1, 2, 4])
    parser.add_argument("--chunks", type=parse_batches, default=[4, 8], help="chunks of keys (world 4, serving 8)")
    parser.add_argument("--engine", default=None, help="also profile a mixed-context denoise step of this model")
    parser.add_argument("--engine-attention", default="fa3,fp8")
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    device = torch.device("cuda")
    config = wan_13b_config()
    tokens, heads, dim = config.tokens_per_chunk, config.num_heads, config.head_dim
    results: dict[str, object] = {"provenance": provenance(device, MODULE, argv),
                                  "fa3_imports": fa3_module() is not None}
    path = Path(args.json)

    def save() -> None:
        path.write_text(json.dumps(results, indent=1, default=str) + "\n")

    for name, part in (("checks", lambda: checks(device, tokens, heads, dim)),
                       ("timings", lambda: timings(device, args.batch, args.chunks, tokens, heads, dim))):
        try:
            results[name] = part()
        except Exception as exc:  # a failed part is recorded; the next still runs
            results[name] = {"error": repr(exc)}
        progress(f"{name}: {json.dumps(results[name], default=str)[:2000]}")
        save()
    if args.engine:
        for attention in args.engine_attention.split(","):
            try:
                results[f"mixed_batch_{attention}"] = mixed_batch_profile(args.engine, attention, device)
            except Exception as exc:
                results[f"mixed_batch_{attention}"] = {"error": repr(exc)}
            progress(f"mixed batch {attention}: {json.dumps(results[f'mixed_batch_{attention}'], default=str)}")
            save()
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
