"""The cost benchmark's levers: named speed options, alone or stacked, switched on a built engine.

A lever is "base" (bf16, SDPA, eager passes, the model's own decoder) or parts joined by "+", e.g.
"preview+fp8+graphs". Parts: `fa3` (FlashAttention-3, bf16), `fp8` (FA3's FP8 kernel with the e4m3 KV
cache), `fp8_triton` (the Triton FP8 kernel over the bf16 cache), `graphs` (CUDA graphs per pass),
`fp8_ffn` and `fp8_proj` (FP8 GEMMs), `kv_last_pass` (the last-pass K/V approximation) and `preview`
(the TAEHV-layout decoder). `fp8` changes the KV cache's element type, so it runs on an engine built
with attention="fp8"; every other part is switched on an engine exactly as its config field would
have built it (`apply_lever`).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine._graphs import PassGraphs, cuda_capturer, rerun_capturer
from engine.decoders import StreamingDecoder
from engine.engine import Engine

__all__ = ["ATTENTION_PARTS", "LOSSY", "PARTS", "Decoders", "Lever", "apply_lever"]

PARTS = ("fa3", "fp8", "fp8_triton", "graphs", "fp8_ffn", "fp8_proj", "kv_last_pass", "preview")
ATTENTION_PARTS = ("fa3", "fp8", "fp8_triton")
LOSSY = ("fp8", "fp8_triton", "fp8_ffn", "fp8_proj", "kv_last_pass")


@dataclass(frozen=True)
class Lever:
    name: str
    parts: tuple[str, ...] = ()

    @classmethod
    def parse(cls, name: str) -> Lever:
        """"base" or parts joined by "+"; ValueError naming what is wrong."""
        if name == "base":
            return cls(name)
        parts = tuple(name.split("+"))
        unknown = [p for p in parts if p not in PARTS]
        if unknown:
            raise ValueError(f"unknown lever part {', '.join(unknown)}; parts: {', '.join(PARTS)} (or base)")
        if len(set(parts)) < len(parts) or sum(p in ATTENTION_PARTS for p in parts) > 1:
            raise ValueError(f"lever {name!r} repeats a part or names two attention kernels")
        return cls(name, parts)

    @classmethod
    def of(cls, name: str, parts: tuple[str, ...]) -> Lever:
        return cls(name, parts)

    def has(self, part: str) -> bool:
        return part in self.parts

    @property
    def attention(self) -> str:
        """The attention backend the lever runs."""
        return next((p for p in self.parts if p in ATTENTION_PARTS), "sdpa")

    @property
    def precision(self) -> str:
        """The KV cache the lever needs: "fp8" (an engine built with attention="fp8") or "bf16"."""
        return "fp8" if self.has("fp8") else "bf16"

    @property
    def parent(self) -> str:
        """The lever this one adds its last part to: its name without that part, or "base"."""
        return "+".join(self.parts[:-1]) or "base"

    @property
    def lossy(self) -> bool:
        return any(p in LOSSY for p in self.parts)


@dataclass
class Decoders:
    exact: StreamingDecoder
    preview: StreamingDecoder | None = None


def apply_lever(engine: Engine, lever: Lever, decoders: Decoders) -> None:
    """Switch `engine` (built with the lever's KV precision) to `lever`: attention backend, FP8
    GEMMs, cuda_graphs, kv_from_last_pass and the decoder, as their config fields would build it."""
    parts, runner, model = engine.parts, engine.runner, engine.parts.model
    parts.attend.select(lever.attention)
    for block in model.blocks:
        block.ffn_fp8 = None  # type: ignore[assignment]
        block.qkv_fp8 = block.cross_q_fp8 = None  # type: ignore[assignment]
    if lever.has("fp8_ffn"):
        model.quantize_ffn()
    if lever.has("fp8_proj"):
        model.quantize_projections()
    config = engine.config.with_overrides(kv_from_last_pass=lever.has("kv_last_pass"), cuda_graphs=lever.has("graphs"),
                                          fp8_ffn=lever.has("fp8_ffn"), fp8_proj=lever.has("fp8_proj"))
    engine.config = runner.config = parts.config = config
    capturer = cuda_capturer(engine.device) if engine.device.type == "cuda" else rerun_capturer
    runner.graphs = PassGraphs(model, parts.pool, parts.attend, parts.rope, capturer) if lever.has("graphs") else None
    decoder = decoders.preview if lever.has("preview") else decoders.exact
    if decoder is None:
        raise ValueError(f"lever {lever.name!r} needs the preview decoder, which this model has none of")
    parts.decoder = runner.decoder = decoder
