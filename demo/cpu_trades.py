"""What each speed trade buys the demo model on a CPU, and what it costs:
``python -m demo.cpu_trades [--threads 1] [--trades a,b] [--chunks 24] [--no-eval] [--json out.json]``.

Per trade, alone against the served settings, on the shipped weights (no retraining): the engine
capacity for one session (frames/s of the served rollout, DiT and decoder, over ``--chunks``
steady chunks after two warm-up chunks, at ``--threads`` torch threads: the daemon's default on a
2-core box is 1) and the quick evaluation's direction and theme accuracy under the same settings
(``demo.eval --quick``). Trades that change what is sampled (steps, guidance, the cache
pass, chunk size) are config overrides; dtype, torch.compile and the attention backend are engine
options. The daemon serves bf16 on a CPU with AVX512-BF16 or AMX and picks the attention backend by
measurement at warmup: the ``bf16_matmul_attention`` row is what it runs on such a CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from demo._eval_parts import EvalParams, streaming_speed
from demo.config import CONFIG, DEFAULT_WEIGHTS, GUIDED_SAMPLING
from demo.errors import DemoError
from demo.eval import QUICK, _demo_engine, evaluate
from demo.export import ENCODER_FILE
from engine.errors import EngineError

__all__ = ["TRADES", "Trade", "main", "measure"]


@dataclass(frozen=True)
class Trade:
    name: str
    what: str
    overrides: dict[str, object] = field(default_factory=dict)  # ModelConfig fields
    dtype: str | None = None  # engine dtype (None: fp32 on the CPU)
    compile: str = "off"
    attention: str = "sdpa"


TRADES: tuple[Trade, ...] = (
    Trade("served", "as served: 3 steps unguided (the weights carry the guidance), cache pass, fp32, eager"),
    Trade("steps2", "2 steps (sigma 1.0, 0.5)", {"denoise_timesteps": (1000.0, 500.0)}),
    Trade("guided", "the first step guided on the actions (scale 3, 2 passes batched): served before 2026-12-07",
          GUIDED_SAMPLING),
    Trade("bf16_matmul_attention_guided", "bf16, the matmul attention and the guided first step (served on such "
          "a CPU before 2026-12-07)", GUIDED_SAMPLING, dtype="bfloat16",
          attention="matmul"),
    Trade("kv_from_last_pass", "no cache pass: the last denoise pass writes the K/V (an approximation)",
          {"kv_from_last_pass": True}),
    Trade("chunk8", "chunks of 8 frames, window 1 chunk (the same 8 frames of context)",
          {"latent_frames_per_chunk": 8, "window_chunks": 1, "max_rollback_chunks": 1}),
    Trade("bf16", "bf16 weights and activations on the CPU", dtype="bfloat16"),
    Trade("compile", "torch.compile of the block kernels on the CPU", compile="on"),
    Trade("matmul_attention", "self-attention as two batched GEMMs around a softmax (exact)", attention="matmul"),
    Trade("bf16_matmul_attention", "bf16 and the matmul attention", dtype="bfloat16", attention="matmul"),
    Trade("steps2_kv_last", "combined: 2 steps, no cache pass",
          {"denoise_timesteps": (1000.0, 500.0), "kv_from_last_pass": True}),
)


def measure(trade: Trade, weights: Path, chunks: int, quick_eval: bool) -> dict[str, object]:
    """Capacity (frames/s) and, with ``quick_eval``, the quick evaluation's accuracies for one trade."""
    model = CONFIG.with_overrides(name=f"demo+{trade.name}", **trade.overrides) if trade.overrides else CONFIG
    started = time.perf_counter()
    engine = _demo_engine(model, "cpu", weights, trade.dtype, trade.compile, trade.attention)
    with torch.inference_mode():
        speed = streaming_speed(engine, EvalParams(speed_chunks=chunks))
    row: dict[str, object] = {"trade": trade.name, "what": trade.what, "frames_per_second": speed["frames_per_second"],
                              "ms_per_chunk": speed["ms_per_chunk"], "frames_per_chunk": model.latent_frames_per_chunk,
                              "threads": torch.get_num_threads()}
    if quick_eval:
        report = evaluate(weights, weights.parent / ENCODER_FILE, "cpu", QUICK, long=False, speed=False, model=model,
                          dtype=trade.dtype, compile=trade.compile, attention=trade.attention)
        motion, theme = report["motion"], report["theme"]
        assert isinstance(motion, dict) and isinstance(theme, dict)
        row |= {"direction_accuracy": motion["direction_accuracy"], "speed_ratio": motion["speed_ratio"],
                "theme_accuracy": theme["theme_accuracy"], "psnr_db_by_chunk": motion["psnr_db_by_chunk"]}
    row["seconds"] = round(time.perf_counter() - started, 1)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m demo.cpu_trades", description=__doc__.split("\n\n")[0])
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the daemon's on 2 cores)")
    p.add_argument("--trades", default=",".join(t.name for t in TRADES), help="comma-separated names")
    p.add_argument("--chunks", type=int, default=24, help="timed chunks per trade (default 24)")
    p.add_argument("--no-eval", action="store_true", help="capacity only")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    known = {t.name: t for t in TRADES}
    names = [n for n in args.trades.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown or args.threads < 1 or args.chunks < 1:
        print(f"error: unknown trades {unknown} (known: {list(known)}), or --threads / --chunks under 1",
              file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    rows = []
    for name in names:
        try:
            row = measure(known[name], args.weights, args.chunks, not args.no_eval)
        except (DemoError, EngineError, RuntimeError) as exc:  # e.g. torch.compile without a compiler
            row = {"trade": name, "what": known[name].what, "error": f"{type(exc).__name__}: {exc}"[:400]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
                                         "threads": args.threads, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
