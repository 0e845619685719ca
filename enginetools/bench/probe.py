"""GPU probe for the cost levers, one call: FP8 attention tiles (time and error vs exact on the
model's shapes), the FFN GEMMs in FP8 vs bf16 (compiled, quantization fused), the TAEHV preview
decoder's time and memory per chunk, a smoke run of CUDA graphs + FP8 attention in the engine, and
the K/V slab gather of the graphed pass (concatenation vs index_select vs the Triton gather).

    python -m enginetools.bench.probe --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback

import torch
import torch.nn.functional as F

from engine.attention_fp8 import Fp8AttentionConfig, fp8_attention

TOKENS = 4680  # one wan-1.3b chunk at 480x832
HEADS, HEAD_DIM, DIM, FFN = 12, 128, 1536, 8960


def _bench(fn, reps: int = 20) -> float:  # type: ignore[no-untyped-def]
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=25, rep=reps * 10, return_mode="median")) / 1e3


def _err(out: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    o, r = out.float().flatten(), ref.float().flatten()
    return {"rel_l2": float((o - r).norm() / r.norm()), "cosine": float(F.cosine_similarity(o, r, dim=0)),
            "rel_l1": float((o - r).abs().mean() / r.abs().mean())}


def _qkv(keys: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # RMS-normed q/k with a per-channel gain and a common offset on k, as after Wan's norm_q/norm_k
    def normed(length: int, offset: float) -> torch.Tensor:
        x = torch.randn(1, length, HEADS, HEAD_DIM, device="cuda", generator=gen)
        x = x + offset * torch.randn(1, 1, HEADS, HEAD_DIM, device="cuda", generator=gen)
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * 1.5).bfloat16()

    q, k = normed(TOKENS, 0.3), normed(keys, 0.8)
    v = torch.randn(1, keys, HEADS, HEAD_DIM, device="cuda", generator=gen).bfloat16()
    return q, k, v


def attention(report: dict[str, object]) -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    configs = [
        Fp8AttentionConfig(128, 128, 8, 3, True), Fp8AttentionConfig(128, 64, 4, 3, True),
        Fp8AttentionConfig(128, 128, 8, 2, True), Fp8AttentionConfig(128, 64, 8, 4, True),
        Fp8AttentionConfig(64, 128, 4, 3, True), Fp8AttentionConfig(128, 128, 8, 3, False),
        Fp8AttentionConfig(128, 128, 8, 3, True, smooth_k=False),
    ]
    rows = []
    for chunks in (2, 4, 8):
        q, k, v = _qkv(TOKENS * chunks, gen)

        def sdpa(q: torch.Tensor = q, k: torch.Tensor = k, v: torch.Tensor = v) -> torch.Tensor:
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)

        exact = F.scaled_dot_product_attention(q.float().transpose(1, 2), k.float().transpose(1, 2),
                                               v.float().transpose(1, 2)).transpose(1, 2)
        base = {"chunks": chunks, "variant": "sdpa_bf16", "seconds": _bench(sdpa), **_err(sdpa(), exact)}
        rows.append(base)
        print(json.dumps(base), flush=True)
        for cfg in configs:
            try:
                out = fp8_attention(q, k, v, cfg)
                row = {"chunks": chunks, "variant": "fp8", **cfg.__dict__,
                       "seconds": _bench(lambda cfg=cfg, q=q, k=k, v=v: fp8_attention(q, k, v, cfg)), **_err(out, exact)}
                row["speedup_vs_sdpa"] = base["seconds"] / row["seconds"]
            except Exception as exc:
                row = {"chunks": chunks, **cfg.__dict__, "error": repr(exc)[:500]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    report["attention"] = rows


def ffn(report: dict[str, object]) -> None:
    from engine.model._fused import _ffn_fp8, linear_gelu_tanh, quantize_rows

    gen = torch.Generator(device="cuda").manual_seed(1)
    h = torch.randn(1, TOKENS, DIM, device="cuda", generator=gen).bfloat16()
    w1 = (torch.randn(FFN, DIM, device="cuda", generator=gen) * 0.02).bfloat16()
    w2 = (torch.randn(DIM, FFN, device="cuda", generator=gen) * 0.02).bfloat16()
    b1 = torch.zeros(FFN, device="cuda", dtype=torch.bfloat16)
    b2 = torch.zeros(DIM, device="cuda", dtype=torch.bfloat16)
    q1, s1 = quantize_rows(w1)
    q2, s2 = quantize_rows(w2)
    pair = (q1, s1.t().contiguous(), q2, s2.t().contiguous())

    def bf16(x: torch.Tensor) -> torch.Tensor:
        return F.linear(linear_gelu_tanh(x, w1, b1), w2, b2)

    def fp8(x: torch.Tensor) -> torch.Tensor:
        return _ffn_fp8(x, pair, b1, b2)

    compiled_fp8 = torch.compile(fp8)
    ref = bf16(h)
    rows = {"bf16": {"seconds": _bench(lambda: bf16(h))},
            "fp8_eager": {"seconds": _bench(lambda: fp8(h)), **_err(fp8(h), ref)},
            "fp8_compiled": {"seconds": _bench(lambda: compiled_fp8(h)), **_err(compiled_fp8(h), ref)}}
    for name, (m, k, n) in {"k1536_n8960": (TOKENS, DIM, FFN), "k8960_n1536": (TOKENS, FFN, DIM),
                             "k1536_n1536": (TOKENS, DIM, DIM), "k1536_n4608": (TOKENS, DIM, 3 * DIM)}.items():
        a = torch.randn(m, k, device="cuda", generator=gen).bfloat16()
        w = torch.randn(n, k, device="cuda", generator=gen).bfloat16()
        a8, sa = quantize_rows(a)
        w8, sw = quantize_rows(w)
        swt = sw.t().contiguous()
        t_bf16 = _bench(lambda a=a, w=w: F.linear(a, w))
        t_fp8 = _bench(lambda a8=a8, w8=w8, sa=sa, swt=swt: torch._scaled_mm(
            a8, w8.t(), scale_a=sa, scale_b=swt, out_dtype=torch.bfloat16))
        rows[f"gemm_{name}"] = {"bf16_s": t_bf16, "fp8_rowwise_s": t_fp8, "speedup": t_bf16 / t_fp8}
    report["ffn"] = rows
    print(json.dumps(rows), flush=True)


def taehv(report: dict[str, object]) -> None:
    from engine.decoders.taehv import TaehvDecoder

    rows = {}
    for layout in ("contiguous", "channels_last"):
        decoder = TaehvDecoder()
        decoder.init_random()
        decoder = decoder.to("cuda", torch.bfloat16).eval()
        if layout == "channels_last":
            decoder = decoder.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        for batch in (1, 4):
            gen = torch.Generator(device="cuda").manual_seed(2)
            latents = torch.randn(batch, 16, 3, 60, 104, device="cuda", generator=gen)
            _, caches = decoder.decode(latents, [None] * batch)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            seconds = _bench(lambda latents=latents, caches=caches, d=decoder: d.decode(latents, caches), reps=10)
            peak = torch.cuda.max_memory_allocated() - before
            rows[f"{layout}_b{batch}"] = {"steady_chunk_s": seconds, "peak_working_bytes": peak,
                                          "cache_bytes_per_session": decoder.cache_bytes(60, 104, torch.bfloat16)}
            print(layout, batch, rows[f"{layout}_b{batch}"], flush=True)
    report["taehv"] = rows


def engine_smoke(report: dict[str, object]) -> None:
    """wan-1.3b at the world geometry, b=1: steady chunk phases with graphs and/or FP8 attention."""
    from engine.api import FrameAction, StepItem, StepPlan
    from engine.config import wan_13b_world_config
    from engine.engine import Engine

    rows = {}
    for name, overrides, attention in (
        ("base", {}, "sdpa"), ("graphs", {"cuda_graphs": True}, "sdpa"),
        ("graphs_fp8attn", {"cuda_graphs": True}, "fp8_triton"),
    ):
        model = wan_13b_world_config().with_overrides(name=f"wan-1.3b-probe-{name}", max_batch=1, **overrides)
        start = time.perf_counter()
        engine = Engine.create(model=model, device="cuda", attention=attention, kv_budget_bytes=8 * 2**30)
        engine.warmup()
        built = time.perf_counter() - start
        engine.open_session("s", seed=0, prompt="probe")
        times: dict[str, list[float]] = {}
        for chunk in range(6):
            engine.begin_chunk("s", [FrameAction(keys=("w",))])
            while (phase := engine.next_phase("s")) is not None:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                result = engine.step(StepPlan((StepItem("s", phase),)))
                torch.cuda.synchronize()
                if result.results[0].error:
                    raise RuntimeError(result.results[0].error)
                if chunk >= 3:
                    times.setdefault(phase.value, []).append(time.perf_counter() - t0)
                if result.results[0].chunk is not None:
                    engine.mark_delivered("s", result.results[0].chunk_index)
        graphs = engine.runner.graphs
        rows[name] = {"build_warm_s": built, "captured": None if graphs is None else graphs.captured,
                      **{k: sorted(v)[len(v) // 2] for k, v in times.items()}}
        print(name, rows[name], flush=True)
        del engine
        torch.cuda.empty_cache()
    report["engine_world_b1"] = rows


def gather(report: dict[str, object]) -> None:
    """One layer's K read for attention at 3 and 7 context slabs (world, serving), b=1: the eager
    path's concatenation of slab views, torch's index_select by device ids, the Triton slab gather."""
    from engine.kv.gather import gather_slabs

    storage = torch.randn(24, TOKENS, HEADS, HEAD_DIM, device="cuda").bfloat16()
    current = torch.randn(1, TOKENS, HEADS, HEAD_DIM, device="cuda").bfloat16()
    rows = {}
    for slabs in (3, 7):
        ids = [5 + 2 * i for i in range(slabs)]
        index = torch.tensor([ids], device="cuda")
        out = current.new_empty(1, slabs + 1, TOKENS, HEADS, HEAD_DIM)

        def cat(ids: list[int] = ids) -> torch.Tensor:
            return torch.cat([current[0], *(storage[i] for i in ids)], dim=0)

        def select(index: torch.Tensor = index, out: torch.Tensor = out) -> None:
            out[:, 0].copy_(current)
            torch.index_select(storage, 0, index[0], out=out[0, 1:])

        def triton_gather(index: torch.Tensor = index, out: torch.Tensor = out) -> None:
            out[:, 0].copy_(current)
            gather_slabs(storage, index, out, first_slot=1)

        triton_gather()
        same = bool(torch.equal(out.view(-1), cat().view(-1)))
        moved = 2 * (slabs + 1) * storage[0].numel() * 2  # bytes read + written
        timings = {name: _bench(fn) for name, fn in (("cat", cat), ("index_select", select), ("triton", triton_gather))}
        rows[f"slabs_{slabs}"] = {**{f"{k}_s": v for k, v in timings.items()}, "triton_equals_cat": same,
                                  **{f"{k}_tb_per_s": moved / v / 1e12 for k, v in timings.items()}}
        print("gather", slabs, rows[f"slabs_{slabs}"], flush=True)
    report["gather"] = rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True)
    parser.add_argument("--parts", default="attention,ffn,taehv,engine,gather")
    args = parser.parse_args(argv)
    report: dict[str, object] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    parts = {"attention": attention, "ffn": ffn, "taehv": taehv, "engine": engine_smoke, "gather": gather}
    for name in args.parts.split(","):
        t0 = time.perf_counter()
        try:
            parts[name](report)
        except Exception:
            report[f"{name}_error"] = traceback.format_exc()[-3000:]
            print(report[f"{name}_error"], file=sys.stderr, flush=True)
        print(f"part {name} took {time.perf_counter() - t0:.1f}s", flush=True)
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
