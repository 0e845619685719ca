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
from engine.attention_fa3 import (
    Descale,
    fa3_attention,
    fa3_attention_lse,
    fa3_module,
    reference_attention,
    reference_attention_lse,
)
from engine.engine import Engine
from engine.model.blocks import Block
from engine.model.kv_fp8 import FP8_MAX, saturated_fraction, to_e4m3
from enginetools.bench.fp8_softmax import attention_p_rounded, softmax_mass
from enginetools.bench.levers import Decoders, Lever, apply_lever
from enginetools.bench.stats import progress

__all__ = ["attention_errors", "compare", "fidelity", "rollout"]

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


def per_chunk_own_means(q8: torch.Tensor, k8: torch.Tensor, v: torch.Tensor, q_scale: torch.Tensor,
                        k_scale: torch.Tensor, chunks: int, run: Callable[..., tuple[torch.Tensor, torch.Tensor]]
                        ) -> torch.Tensor:
    """FP8 attention done the exact way for a common offset that varies from chunk to chunk: each
    chunk of keys' values centred by that chunk's own mean (with its own scale) and attended in its own
    call; the calls merged by their log-sum-exp, each adding its mean back weighted by its share of
    the softmax mass. `run(q8, k8, v8, descale) -> (out, lse)`: FA3's op or the fp32 reference. The
    keys' common centring (one mean key for all chunks) shifts every call's lse by the same amount
    per query row, which the merge cancels. fp32 out, q's layout."""
    length = k8.shape[1] // chunks
    outs, lses = [], []
    for c in range(chunks):
        part = slice(c * length, (c + 1) * length if c + 1 < chunks else k8.shape[1])
        v8, scale, mean = _centred_e4m3(v[:, part])
        out, lse = run(q8, k8[:, part], v8, Descale(q_scale, k_scale, scale))
        outs.append(out.float() + mean)
        lses.append(lse.float())
    share = torch.softmax(torch.stack(lses), dim=0).transpose(2, 3)[..., None]  # (chunks, B, Lq, heads, 1)
    return (share * torch.stack(outs)).sum(dim=0)


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
        out["fp8_saturated"] = {"q": saturated_fraction(q, s.q_scale), "k": saturated_fraction(k, s.k_scale, s.k_mean),
                                "v": saturated_fraction(v, s.v_scale, s.v_mean)}
        attend: AttentionBackend = fp8_engine.parts.attend
        static = (to_e4m3(q, s.q_scale), to_e4m3(k, s.k_scale, s.k_mean), to_e4m3(v, s.v_scale, s.v_mean))
        kernels["fp8"] = lambda: attend(*static, None, s.descale).float() + s.v_mean  # as the block adds it back
        # where the error comes from: the same e4m3 inputs attended exactly; scales fitted to these
        # very tensors (per-head peaks, this call's mean key, v not centred); the fixed scales without
        # the mean key
        kernels["fp8_inputs_exact_attention"] = lambda: reference_attention(*static, s.descale).float() + s.v_mean
        tight = _fitted(q, k, v)
        kernels["fp8_fitted_scales"] = lambda: attend(*tight[:3], None, tight[3])
        kernels["fp8_fitted_scales_exact_attention"] = lambda: reference_attention(*tight)
        kernels["fp8_without_mean"] = lambda: attend(to_e4m3(q, s.q_scale), to_e4m3(k, s.k_scale), static[2], None,
                                                     s.descale).float() + s.v_mean
        # the kernel's rounding of the softmax weights P to e4m3, emulated on the same inputs (fp32
        # elsewhere): equal to the kernel's error, it names the cause; by blocks of keys (one call
        # per context chunk, merged by log-sum-exp), whether splitting the call would cure it
        dq, dk, dv = (x.float() * sc[:, None] for x, sc in zip(static, (s.q_scale, s.k_scale, s.v_scale), strict=True))
        chunks = max(1, round(k.shape[1] / q.shape[1]))
        kernels["fp8_p_rounded_emulated"] = lambda: attention_p_rounded(dq, dk, dv, 8) + s.v_mean
        kernels["fp8_p_rounded_emulated_no_offset"] = lambda: attention_p_rounded(dq, dk, dv, 0) + s.v_mean
        kernels[f"fp8_p_rounded_emulated_{chunks}_calls"] = lambda: attention_p_rounded(dq, dk, dv, 8, chunks) + s.v_mean
        # v not centred (the engine before v_mean), and centred by this very call's mean instead of
        # the calibrated one (what a perfect calibration would give)
        kernels["fp8_v_not_centred"] = lambda: attend(static[0], static[1], to_e4m3(v, s.v_scale), None, s.descale)
        v8, vc_scale, v_mean = _centred_e4m3(v)
        centred = (static[0], static[1], v8)
        centred_descale = Descale(s.q_scale, s.k_scale, vc_scale)
        kernels["fp8_v_own_mean"] = lambda: attend(*centred, None, centred_descale).float() + v_mean
        # the exact way the engine could take: one call per chunk of keys, each chunk's values centred by
        # their own mean, merged by log-sum-exp (FA3's op on a GPU; the fp32 reference elsewhere)
        with_lse: Callable[..., tuple[torch.Tensor, torch.Tensor]] = (
            (lambda *a: fa3_attention_lse(module, *a)) if module is not None else reference_attention_lse)
        kernels[f"fp8_{chunks}_calls_own_chunk_means"] = lambda: per_chunk_own_means(
            static[0], static[1], v, s.q_scale, s.k_scale, chunks, with_lse)
        kernels["fp8_v_own_mean_exact_attention"] = lambda: reference_attention(*centred, centred_descale).float() + v_mean
        out["v_mean_norm_over_residual_rms"] = _offset_over_spread(v, v_mean)
        out["softmax_mass"] = softmax_mass(dq, dk, 8).as_dict()
        out["softmax_mass_no_offset"] = softmax_mass(dq, dk, 0).as_dict()
        mean = k.float().mean(dim=(0, 1))
        out["k_mean_norm_over_residual_rms"] = _offset_over_spread(k, mean)
        out["k_calibrated_mean_vs_this_mean_rel"] = float((s.k_mean - mean).norm() / mean.norm().clamp_min(1e-12))
        out["v_calibrated_mean_vs_this_mean_rel"] = float((s.v_mean - v_mean).norm() / v_mean.norm().clamp_min(1e-12))
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
