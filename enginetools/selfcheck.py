"""`python -m enginetools.selfcheck [--device cuda] [--compile on|off|auto]`: roll the tiny model out on
the given device and compare it with the CPU fp32 eager reference (max relative error of every
recorded chunk's latents). Run it on a GPU host before benchmarking: it exercises the batched step,
the KV pool, compiled kernels and warmup in about a minute.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
from safetensors.torch import load

from engine.api import FrameAction, StepItem, StepPlan
from engine.engine import Engine

__all__ = ["main", "rollout_latents", "selfcheck"]

_CHUNKS = 6  # tiny: sink 1 + window 2, so the ring wraps
_TOLERANCE = 1e-4


def rollout_latents(
    device: str, compile_mode: str, chunks: int = _CHUNKS, attention: str = "auto",
) -> dict[str, torch.Tensor]:
    """Two sessions stepped together (different seeds) for `chunks` chunks; their snapshots' latents."""
    engine = Engine.create(model="tiny", device=device, dtype="float32", compile=compile_mode, attention=attention)
    engine.warmup()
    sessions = ("a", "b")
    for n, sid in enumerate(sessions):
        engine.open_session(sid, seed=n, prompt="rolling hills")
    engine.begin_chunk("b", [FrameAction(keys=("d",))])  # b runs one chunk ahead: mixed contexts
    while (phase := engine.next_phase("b")) is not None:
        engine.step(StepPlan((StepItem("b", phase),)))
    for _ in range(chunks):
        for sid in sessions:
            engine.begin_chunk(sid, [FrameAction(keys=("w",), mouse=(3.0, -1.0))])
        while (phase := engine.next_phase("a")) is not None:
            result = engine.step(StepPlan(tuple(StepItem(sid, phase) for sid in sessions)))
            errors = [r.error for r in result.results if r.error]
            if errors:
                raise RuntimeError(f"step failed: {errors}")
    latents: dict[str, torch.Tensor] = {}
    for sid in sessions:
        for key, value in load(engine.snapshot(sid)).items():
            if key.startswith("latents."):
                latents[f"{sid}.{key}"] = value
    return latents


def selfcheck(device: str, compile_mode: str) -> dict[str, object]:
    reference = rollout_latents("cpu", "off", attention="sdpa")  # the reference never depends on a timing
    got = rollout_latents(device, compile_mode)
    per_chunk = {k: float((got[k] - reference[k]).abs().max() / reference[k].abs().max()) for k in sorted(reference)}
    error = max(per_chunk.values())
    return {"device": device, "compile": compile_mode, "chunks": sorted(reference), "max_rel_err": error,
            "rel_err_by_chunk": per_chunk, "tolerance": _TOLERANCE, "ok": error <= _TOLERANCE}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m enginetools.selfcheck", description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--compile", default="auto", choices=("auto", "on", "off"))
    args = parser.parse_args(argv)
    report = selfcheck(args.device, args.compile)
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
