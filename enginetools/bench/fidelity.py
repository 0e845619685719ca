"""How far each lossy lever moves the model's output from the exact bf16 path, on the same seeds:
per chunk of a rollout, the relative L2 error and cosine of the final (clean) latents; and, on the
model's own q, k, v (captured from a cache pass of the exact rollout), the attention output's error
against fp32 for bf16 SDPA, FA3 bf16, FA3 FP8 (quantized with the FP8 engine's fixed scales, with
the share of k and v values its scales saturate) and the Triton FP8 kernel, where each can run."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from engine.api import FrameAction, Phase, StepItem, StepPlan
from engine.attention import AttentionBackend
from engine.attention_fa3 import Descale, fa3_attention, fa3_module, reference_attention
from engine.engine import Engine
from engine.model import AttnContext
from engine.model._fused import BlockKernels
from engine.model.blocks import Block, fp8_attention_by_chunks
from engine.model.kv_fp8 import FP8_MAX, KVFp8, saturated_fraction, to_e4m3
from enginetools.bench.fp8_softmax import attention_p_rounded, softmax_mass
from enginetools.bench.levers import Decoders, Lever, apply_lever
from enginetools.bench.stats import progress

__all__ = ["attention_errors", "compare", "engine_fp8_attention", "fidelity", "rollout"]

PROMPT = "a stone bridge over a mountain river at dusk"
QKV = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def rollout(engine: Engine, chunks: int, seed: int, capture_at: int | None = None,
            layers: tuple[int, ...] = (0,)) -> tuple[list[torch.Tensor], dict[int, QKV]]:
    """One session's clean latents per chunk; with `capture_at`, the q, k, v that self-attention of
    `layers` saw in that chunk's cache pass (current chunk + context keys)."""
    engine.open_session("fidelity", seed=seed, prompt=PROMPT)
    captured: dict[int, QKV] = {}
    attend = engine.parts.attend
    original = attend._fn
    calls = [0]

    def spy(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if calls[0] in layers:
            captured[calls[0]] = (q.clone(), k.clone(), v.clone())
        calls[0] += 1
        return original(q, k, v, mask)

    latents: list[torch.Tensor] = []
    try:
        for index in range(chunks):
            engine.begin_chunk("fidelity", [FrameAction(keys=("w",), mouse=(4.0, 0.0))])
            while (phase := engine.next_phase("fidelity")) is not None:
                attend._fn = spy if (index == capture_at and phase is Phase.CACHE) else original
                result = engine.step(StepPlan((StepItem("fidelity", phase),))).results[0]
                attend._fn = original
                if result.error:
                    raise RuntimeError(result.error)
                if result.chunk is not None:
                    engine.mark_delivered("fidelity", result.chunk_index)
            # read now: a window shorter than the rollout forgets old records
            latents.append(engine.session("fidelity").records[index].latents.float().cpu())
    finally:
        attend._fn = original
        engine.close_session("fidelity")
    return latents, captured


def compare(exact: list[torch.Tensor], other: list[torch.Tensor]) -> dict[str, list[float]]:
    rel = [float((o - e).norm() / e.norm()) for e, o in zip(exact, other, strict=True)]
    cos = [float(F.cosine_similarity(o.flatten(), e.flatten(), dim=0)) for e, o in zip(exact, other, strict=True)]
    return {"rel_l2_per_chunk": rel, "cosine_per_chunk": cos}


def _centred_e4m3(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(e4m3 of x centred by its own per-head mean, the per-head scale from its centred peak, the mean)."""
    mean = x.float().mean(dim=(0, 1))
    scale = (x.float() - mean).abs().amax(dim=(0, 1, 3)).clamp_min(1e-12) / FP8_MAX
    return to_e4m3(x, scale, mean), scale, mean


def _offset_over_spread(x: torch.Tensor, mean: torch.Tensor) -> float:
    """Median over heads of |mean| over the RMS norm of x - mean: how large x's common offset is."""
    return float((mean.norm(dim=-1) / (x.float() - mean).pow(2).sum(-1).mean(dim=(0, 1)).sqrt()).median())


def _fitted(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Descale]:
    """e4m3 q, k, v with per-head scales from these tensors' own peaks, k centred by its own mean."""
    qs, vs = (x.float().abs().amax(dim=(0, 1, 3)).clamp_min(1e-12) / FP8_MAX for x in (q, v))
    k8, ks, _ = _centred_e4m3(k)
    return to_e4m3(q, qs), k8, to_e4m3(v, vs), Descale(qs, ks, vs)


def engine_fp8_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scales: KVFp8,
                         attend: AttentionBackend) -> torch.Tensor:
    """Attention as the FP8 engine runs it, on bf16 q (B, T, heads, d) and keys k, v (B, C * T, ...)
    of C chunks: q and k quantized with the layer's fixed scales, each chunk's values centred by its
    own mean, then the block's own code (`fp8_attention_by_chunks`: one call per chunk of keys,
    merged by log-sum-exp). `attend`: the FP8 engine's backend (FA3 on CUDA) or a CPU one (the exact
    reference on the same e4m3 inputs). fp32 (B, T, heads, d)."""
    batch, tokens = q.shape[:2]
    chunks = k.shape[1] // tokens
    by_chunk = v.reshape(batch, chunks, tokens, *v.shape[2:])
    means = by_chunk.float().mean(dim=2)  # (B, C, heads, d)
    v8 = to_e4m3(by_chunk, scales.v_scale, means[:, :, None]).view(v.shape)
    k8 = to_e4m3(k, scales.k_scale, scales.k_mean)
    ctx = AttnContext(cos=q.new_empty(0), sin=q.new_empty(0), contexts=[[0] * (chunks - 1)] * batch,
                      read=lambda layer, slabs, k_, v_: (k8, v8),
                      read_means=lambda layer, slabs, centre: means.reshape(-1, *means.shape[2:]))
    return fp8_attention_by_chunks(to_e4m3(q, scales.q_scale), k8[:, :tokens], v8[:, :tokens], means[:, 0], 0,
                                   ctx, attend, BlockKernels(), scales.descale, torch.float32)


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def attention_errors(qkv: QKV, layer: int, fp8_engine: Engine | None) -> dict[str, object]:
    """Output errors against fp32 on one layer's captured bf16 q, k, v (B, L, heads, d)."""
    q, k, v = qkv
    ref = F.scaled_dot_product_attention(q.float().transpose(1, 2), k.float().transpose(1, 2),
                                         v.float().transpose(1, 2)).transpose(1, 2)
    out: dict[str, object] = {"layer": layer, "shape_q_kv": [list(q.shape), list(k.shape)]}
    kernels: dict[str, Callable[[], torch.Tensor]] = {
        "bf16_sdpa": lambda: F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)}
    module = fa3_module() if q.is_cuda else None
    if module is not None:
        kernels["fa3_bf16"] = lambda: fa3_attention(module, q, k, v)
    if q.is_cuda:
        from engine.attention_fp8 import fp8_attention, fp8_attention_usable

        if fp8_attention_usable(q):
            kernels["fp8_triton"] = lambda: fp8_attention(q, k, v)
    if fp8_engine is not None:
        block = fp8_engine.parts.model.blocks[layer]
        assert isinstance(block, Block) and block.kv_fp8 is not None
        s = block.kv_fp8
        by_chunk = v.reshape(v.shape[0], -1, q.shape[1], *v.shape[2:])  # (B, C, T, heads, d)
        out["fp8_saturated"] = {"q": saturated_fraction(q, s.q_scale), "k": saturated_fraction(k, s.k_scale, s.k_mean),
                                "v": saturated_fraction(by_chunk, s.v_scale, by_chunk.float().mean(2, keepdim=True))}
        attend: AttentionBackend = fp8_engine.parts.attend
        static = (to_e4m3(q, s.q_scale), to_e4m3(k, s.k_scale, s.k_mean))
        reference = AttentionBackend.create("fp8", torch.device("cpu"))  # the exact reference, on any device
        kernels["fp8"] = lambda: engine_fp8_attention(q, k, v, s, attend)  # as the engine runs it
        # where the error comes from: the same e4m3 inputs attended exactly; scales fitted to these
        # very tensors (per-head peaks, this call's mean key, v not centred); the fixed scales without
        # the mean key; one call over all keys with v centred by the call's mean or not at all
        kernels["fp8_inputs_exact_attention"] = lambda: engine_fp8_attention(q, k, v, s, reference)
        tight = _fitted(q, k, v)
        kernels["fp8_fitted_scales"] = lambda: attend(*tight[:3], None, tight[3])
        kernels["fp8_fitted_scales_exact_attention"] = lambda: reference_attention(*tight)
        kernels["fp8_one_call_v_not_centred"] = lambda: attend(*static, to_e4m3(v, s.v_scale), None, s.descale)
        v8, vc_scale, v_mean = _centred_e4m3(v)
        centred_descale = Descale(s.q_scale, s.k_scale, vc_scale)
        kernels["fp8_one_call_v_own_mean"] = lambda: attend(*static, v8, None, centred_descale).float() + v_mean
        kernels["fp8_one_call_v_own_mean_without_mean_key"] = lambda: attend(
            static[0], to_e4m3(k, s.k_scale), v8, None, centred_descale).float() + v_mean
        # the kernel's rounding of the softmax weights P to e4m3, emulated on the one-call inputs
        dq, dk, dv = (x.float() * sc[:, None] for x, sc in zip((*static, v8), (s.q_scale, s.k_scale, vc_scale),
                                                               strict=True))
        kernels["fp8_one_call_p_rounded_emulated"] = lambda: attention_p_rounded(dq, dk, dv, 8) + v_mean
        out["v_mean_norm_over_residual_rms"] = _offset_over_spread(v, v_mean)
        # how far the chunks' own means stray from the call's, over v's residual spread (median over heads)
        chunk_means = v.float().reshape(v.shape[0], -1, q.shape[1], *v.shape[2:]).mean(dim=(0, 2))  # (C, heads, d)
        stray = (chunk_means - v_mean).pow(2).sum(-1).mean(0).sqrt()  # (heads,)
        spread = (v.float() - v_mean).pow(2).sum(-1).mean(dim=(0, 1)).sqrt()
        out["v_chunk_means_stray_over_residual_rms"] = float((stray / spread).median())
        out["softmax_mass"] = softmax_mass(dq, dk, 8).as_dict()
        out["softmax_mass_no_offset"] = softmax_mass(dq, dk, 0).as_dict()
        mean = k.float().mean(dim=(0, 1))
        out["k_mean_norm_over_residual_rms"] = _offset_over_spread(k, mean)
        out["k_calibrated_mean_vs_this_mean_rel"] = float((s.k_mean - mean).norm() / mean.norm().clamp_min(1e-12))
        out["peaks_over_scale_x448"] = {name: float((x.float().abs().amax(dim=(0, 1, 3)) / sc).median())
                                        for name, x, sc in (("q", q, s.q_scale), ("k", k, s.k_scale), ("v", v, s.v_scale))}
    for name, run in kernels.items():
        out[name] = _rel(run(), ref)
    return out


def fidelity(engines: dict[str, Engine], decoders: dict[str, Decoders], levers: list[Lever], chunks: int,
             seeds: list[int], capture_layers: tuple[int, ...]) -> dict[str, object]:
    """Each lossy lever's rollout against the exact one ("base" on the bf16 engine), per seed and
    chunk; the attention output errors on the exact rollout's q, k, v (first seed, cache pass of
    chunk min(3, chunks - 1))."""
    out: dict[str, object] = {"chunks": chunks, "seeds": seeds}
    exact_engine = engines["bf16"]
    apply_lever(exact_engine, Lever("base"), decoders["bf16"])
    capture_at = min(3, chunks - 1)
    exact = [rollout(exact_engine, chunks, seed, capture_at if i == 0 else None, capture_layers)
             for i, seed in enumerate(seeds)]
    for lever in (lev for lev in levers if lev.lossy):
        engine = engines[lever.precision]
        apply_lever(engine, lever, decoders[lever.precision])
        per_seed = [compare(exact[i][0], rollout(engine, chunks, seed)[0]) for i, seed in enumerate(seeds)]
        out[lever.name] = {"per_seed": per_seed,
                           "worst_rel_l2": max(max(s["rel_l2_per_chunk"]) for s in per_seed),
                           "worst_cosine": min(min(s["cosine_per_chunk"]) for s in per_seed)}
        progress(f"fidelity {lever.name}: worst rel L2 {out[lever.name]['worst_rel_l2']:.4f}, "  # type: ignore[index]
                 f"worst cosine {out[lever.name]['worst_cosine']:.6f}")  # type: ignore[index]
        apply_lever(engine, Lever("base") if lever.precision == "bf16" else Lever("fp8", ("fp8",)),
                    decoders[lever.precision])
    if seeds:
        captured = exact[0][1]
        out["attention_output_error"] = [attention_errors(captured[layer], layer, engines.get("fp8"))
                                         for layer in sorted(captured)]
        progress(f"attention output errors: {out['attention_output_error']}")
    apply_lever(exact_engine, Lever("base"), decoders["bf16"])
    return out
