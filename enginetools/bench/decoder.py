"""`python -m enginetools.bench.decoder --model wan-1.3b --device cuda [--batch 1] [--repeats 10]`: the
streaming decoder alone, per way of running it (engine.decoders._wan_layout candidates).

For each candidate: the median seconds of a steady-chunk decode (the stream already started) over
`--repeats` runs after an untimed one, and how far its output is from the first candidate's (plain
NCDHW, eager norms): the max relative error of the decoder output and the max difference of the
uint8 frames. Random latents and random weights (same compute as real ones). On CUDA also the
fastest candidate's device time per op and input shape (one profiled decode). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from engine._setup import expandable_segments
from engine._timing import median_seconds
from engine.catalog import ModelCatalog, core_catalog
from engine.config import ModelConfig
from engine.decoders._wan_layout import candidates, cudnn_benchmark, parse_candidate
from engine.decoders.wan_vae import build_wan_vae_decoder

__all__ = ["main", "measure_decoder_candidates"]

_TOP_SHAPES = 30
# ops whose device time is their callees' (counted there)
_WRAPPERS = frozenset({"aten::convolution", "aten::_convolution", "aten::conv3d", "aten::to",
                       "aten::_to_copy", "aten::contiguous", "aten::clone", "aten::linear", "aten::reshape",
                       "aten::scaled_dot_product_attention"})


@torch.no_grad()
def measure_decoder_candidates(config: ModelConfig, device: torch.device, batch: int, repeats: int) -> dict[str, object]:
    if config.decoder_kind != "wan_vae":
        raise SystemExit(f"model {config.name!r} has no Wan VAE decoder (decoder_kind {config.decoder_kind!r})")
    config = config.with_overrides(extra={**config.extra, "wan_vae_layout": "ncdhw"})
    if device.type == "cuda":
        expandable_segments()  # the allocator setting the engine runs with
    decoder = build_wan_vae_decoder(config, device, torch.bfloat16)
    generator = torch.Generator().manual_seed(0)
    shape = (batch, config.out_dim, config.latent_frames_per_chunk, config.latent_height, config.latent_width)
    start_latents, latents = (torch.randn(shape, generator=generator).to(device) for _ in range(2))
    ways = candidates(device.type == "cuda", decoder.fused_available())
    results: dict[str, dict[str, float]] = {}
    reference: tuple[torch.Tensor, torch.Tensor] | None = None
    for candidate in ways:
        decoder.set_layout(candidate.layout, cudnn_benchmark=candidate.benchmark, fused=candidate.fused)
        _, caches = decoder.decode(start_latents, [None] * batch)
        with cudnn_benchmark(candidate.benchmark):
            rgb, _ = decoder.decode_rgb(latents, list(caches))
        frames = decoder._to_uint8(rgb)
        seconds = median_seconds(lambda: decoder.decode(latents, list(caches)), device, repeats, warm=False)  # noqa: B023
        if reference is None:
            reference = (rgb.float(), frames)
        rel = float((rgb.float() - reference[0]).abs().max() / reference[0].abs().max())
        diff = int((frames.int() - reference[1].int()).abs().max())
        results[candidate.name] = {"steady_decode_s": seconds, "max_rel_err": rel, "max_uint8_diff": diff}
        print(f"{candidate.name:<42} {seconds * 1e3:8.1f} ms  rel err {rel:.2e}  uint8 diff {diff}",
              file=sys.stderr, flush=True)
    report: dict[str, object] = {"model": config.name, "device": str(device), "batch": batch, "repeats": repeats,
                                 "reference": ways[0].name, "candidates": results}
    if device.type == "cuda":  # where the fastest candidate's time goes, per conv shape
        fastest = min(results, key=lambda name: results[name]["steady_decode_s"])
        chosen = parse_candidate(fastest)
        decoder.set_layout(chosen.layout, cudnn_benchmark=chosen.benchmark, fused=chosen.fused)
        report["ops_by_shape"] = {"candidate": fastest, "ops": _ops_by_shape(
            lambda: decoder.decode(latents, list(caches)), device)}
    return report


def _ops_by_shape(fn: Callable[[], object], device: torch.device) -> list[dict[str, object]]:
    """One call under the profiler: device milliseconds per (op, input shapes), largest first."""
    fn()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        fn()
        torch.cuda.synchronize(device)
    rows = [
        {"op": str(e.key), "shapes": str(e.input_shapes)[:160], "calls": int(e.count),
         "device_ms": float(getattr(e, "device_time_total", 0.0)) / 1e3}
        for e in prof.key_averages(group_by_input_shape=True)
        if str(e.key).startswith("aten::") and str(e.key) not in _WRAPPERS
    ]
    rows.sort(key=lambda row: -float(row["device_ms"]))  # type: ignore[arg-type]
    for row in rows[:_TOP_SHAPES]:
        print(f"{row['device_ms']:8.2f} ms {row['calls']:>4}x  {row['op']:<28} {row['shapes']}", file=sys.stderr)
    return rows[:_TOP_SHAPES]


def main(argv: list[str] | None = None, catalog: ModelCatalog | None = None) -> int:
    """catalog: where --model is looked up (None: the core's models)."""
    parser = argparse.ArgumentParser(prog="python -m enginetools.bench.decoder", description=__doc__)
    parser.add_argument("--model", default="wan-1.3b")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)
    config = (catalog or core_catalog()).config(args.model)
    report = measure_decoder_candidates(config, torch.device(args.device), args.batch, args.repeats)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json_path:
        with open(args.json_path, "w") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
