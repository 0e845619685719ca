"""What a results file says besides the timings: provenance, the reference, and the targets."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path

import torch

__all__ = ["REFERENCE", "TARGETS", "check_targets", "provenance"]

# Self-Forcing reference loop on one H200 (docs/performance.md, Reference, 2026-11-29), wan-1.3b, bf16
REFERENCE = {
    "source": "docs/performance.md (reference): Self-Forcing reference loop, one H200, wan-1.3b 480x832, bf16",
    "fps_single_stream": 18.3,
    "fps_aggregate_4_streams": 19.3,
    "first_frames_ms": 540.0,
    "dit_only_fps_single_stream": 28.7,
    "dit_achieved_tflops": 351.0,
    "decode_ms_per_chunk": 246.0,
    "matmul_peak_tflops": 790.0,
}

# the engine's performance targets (global 81-frame workload, DiT + streaming Wan-VAE decode)
TARGETS = {
    "fps_single_stream": 27.0,
    "fps_aggregate_4_streams": 48.0,
    "first_frames_ms": 300.0,
    "dit_achieved_tflops": 0.5 * 790.0,
}


def _git(*args: str) -> str | None:
    root = Path(__file__).resolve().parents[1]
    try:
        done = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _driver() -> str | None:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip().splitlines()[0] if done.stdout.strip() else None


def provenance(device: torch.device, module: str, argv: list[str]) -> dict[str, object]:
    """Commit, device, driver, date, versions (torch, CUDA, cuDNN, Triton, FlashAttention-3) and the
    command line of this run. A tree copied without its .git (or into another checkout) names its
    commit in SESSIOND_COMMIT, which then wins over the checkout's HEAD."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    cuda = device.type == "cuda"
    commit, named = _git("rev-parse", "HEAD"), os.environ.get("SESSIOND_COMMIT")
    return {
        "git_commit": named or commit,
        "git_commit_from": "SESSIOND_COMMIT" if named else ("git" if commit else None),
        "checkout_git_commit": commit,  # a tree copied into another checkout: that checkout's HEAD
        "git_dirty": None if status is None else bool(status),
        "driver_version": _driver() if cuda else None,
        "triton_version": _version("triton"),
        "fa3_fwd_version": _version("fa3_fwd"),
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device)
        if cuda
        else platform.processor() or platform.machine(),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda if cuda else None,
        "cudnn_version": torch.backends.cudnn.version() if cuda else None,
        "python_version": platform.python_version(),
        "cpu_threads": torch.get_num_threads(),
        "command": " ".join([Path(sys.executable).name, "-m", module, *argv]),
    }


def _verdict(name: str, measured: float | None, target: float, higher_is_better: bool) -> dict[str, object]:
    if measured is None:
        return {"target": target, "measured": None, "met": False, "note": f"{name} not measured in this run"}
    met = measured >= target if higher_is_better else measured <= target
    ratio = measured / target if higher_is_better else target / measured
    return {
        "target": target,
        "measured": measured,
        "met": met,
        "fraction_of_target": ratio,
        "missed_by": None if met else abs(target - measured),
    }


def check_targets(global_runs: dict[int, dict[str, object]]) -> dict[str, object]:
    """The benchmark's targets (TARGETS) against the global workload's batch 1 and batch 4 results."""
    one, four = global_runs.get(1, {}), global_runs.get(4, {})

    def num(run: dict[str, object], key: str) -> float | None:
        value = run.get(key)
        return float(value) if isinstance(value, int | float) else None

    return {
        "applies_to": "wan-1.3b on one H200, bf16, global 81-frame workload (7 chunks)",
        "fps_single_stream": _verdict(
            "batch 1", num(one, "fps_per_session_mean"), TARGETS["fps_single_stream"], True
        ),
        "fps_aggregate_4_streams": _verdict(
            "batch 4", num(four, "fps_aggregate"), TARGETS["fps_aggregate_4_streams"], True
        ),
        "first_frames_ms": _verdict("batch 1", num(one, "ttff_ms"), TARGETS["first_frames_ms"], False),
        "dit_achieved_tflops": _verdict(
            "batch 1", num(one, "dit_achieved_tflops"), TARGETS["dit_achieved_tflops"], True
        ),
    }
