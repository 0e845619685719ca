"""Command-line arguments of the engine benchmark (argparse only: cheap to import for `sessiond`)."""

from __future__ import annotations

import argparse

__all__ = ["WORKLOADS", "add_arguments", "device_argument", "parse_batches", "parse_window", "parse_workloads"]

WORKLOADS = ("global", "rolling", "mixed")


def parse_batches(text: str) -> list[int]:
    try:
        batches = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"--batch wants comma-separated integers like 1,2,4; got {text!r}"
        ) from exc
    if not batches or min(batches) < 1:
        raise argparse.ArgumentTypeError(f"--batch wants positive integers like 1,2,4; got {text!r}")
    return batches


def device_argument(text: str) -> str:
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()) or (kind == "cpu" and index):
        raise argparse.ArgumentTypeError(f"--device wants cpu, cuda or cuda:N; got {text!r}")
    return text


def parse_window(text: str) -> tuple[int, int]:
    parts = text.split(",")
    try:
        sink, window = (int(p) for p in parts)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"--window wants SINK,WINDOW in chunks like 1,6; got {text!r}"
        ) from exc
    if sink < 0 or window < 1:
        raise argparse.ArgumentTypeError(f"--window needs SINK >= 0 and WINDOW >= 1; got {text!r}")
    return sink, window


def parse_workloads(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"--workloads takes names from {','.join(WORKLOADS)}; got {text!r}")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="tiny", help="model config name: tiny, wan-1.3b, demo")
    parser.add_argument("--batch", type=parse_batches, default=[1, 2, 4], help="batch sizes, e.g. 1,2,4,8")
    parser.add_argument("--json", dest="json_path", default=None, help="write the results JSON here")
    parser.add_argument(
        "--device", type=device_argument, default=None, help="cpu or cuda (default: cuda when available)"
    )
    parser.add_argument(
        "--dtype", default=None, help="bf16, fp16 or fp32 (default: bf16 on cuda, fp32 on cpu)"
    )
    parser.add_argument(
        "--chunks", type=int, default=7, help="chunks per session in the global workload (7 = 81 frames)"
    )
    parser.add_argument(
        "--steady-chunks", type=int, default=3, help="timed chunks in the rolling and mixed workloads"
    )
    parser.add_argument(
        "--window",
        type=parse_window,
        default=None,
        help="SINK,WINDOW chunks for the rolling and mixed workloads (default: the model's)",
    )
    parser.add_argument(
        "--workloads",
        type=parse_workloads,
        default=list(WORKLOADS),
        help="comma-separated subset of global,rolling,mixed",
    )
    parser.add_argument(
        "--mixed-context",
        action="store_true",
        help="run only the global and mixed workloads (sessions at different context lengths batched)",
    )
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's)")
    parser.add_argument("--attention", default="auto", help="attention backend: auto (measured), sdpa, flash")
    parser.add_argument(
        "--weights", default=None, help="DiT safetensors (default: random init, same compute)"
    )
    parser.add_argument("--vae-weights", default=None, help="decoder safetensors (default: random init)")
    parser.add_argument(
        "--kv-budget-gib", type=float, default=None, help="KV pool size (default: fits the batches)"
    )
    parser.add_argument(
        "--profile",
        default=None,
        help="write a torch.profiler table of the top ops here (on CUDA default: next to --json)",
    )
    parser.add_argument(
        "--profile-batch", type=int, default=None, help="batch to profile (default: the first)"
    )
    parser.add_argument(
        "--plot", default=None, help="write a PNG of frames/s vs batch here (needs matplotlib)"
    )
