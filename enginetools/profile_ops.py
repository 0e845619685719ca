"""Where the time goes: one workload run under torch.profiler, summarised as a table of top ops."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from enginetools.profile_trace import phase_times
from enginetools.profile_trace import table as gpu_time_table

__all__ = ["TOP_OPS", "profile_call"]

TOP_OPS = 25  # rows in the table and in the JSON summary
US_PER_MS = 1e3


def _self_device_us(event: object) -> float:
    for name in ("self_device_time_total", "self_cuda_time_total"):
        value = getattr(event, name, None)
        if isinstance(value, int | float):
            return float(value)
    return 0.0


def profile_call(
    run: Callable[[], object], device: torch.device, table_path: str | Path
) -> dict[str, object]:
    """Run `run()` under the profiler; write the op table to `table_path`; return the top ops.
    On CUDA also the GPU's busy and idle time per phase (enginetools.profile_trace), as a table beside it.

    On CUDA ops are ranked by self device (kernel) time, on CPU by self CPU time. Phases show
    up as `bench.denoise` / `bench.cache` / `bench.decode` ranges (record_function)."""
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    with profile(activities=activities, record_shapes=False) as prof:
        run()
        if cuda:
            torch.cuda.synchronize(device)
    gpu_time: dict[str, object] = {}
    if cuda:  # busy vs idle GPU time per phase, from the kernel timeline
        with tempfile.TemporaryDirectory() as scratch:
            trace_path = Path(scratch) / "trace.json"
            prof.export_chrome_trace(str(trace_path))
            gpu_phases = phase_times(json.loads(trace_path.read_text()))
        gpu_path = Path(table_path).with_name(Path(table_path).stem + "_gpu_time.txt")
        gpu_path.write_text(gpu_time_table(gpu_phases))
        gpu_time = {"table": str(gpu_path), "phases": {k: v.summary() for k, v in gpu_phases.items()}}
    averages = prof.key_averages()
    sort_by = "self_device_time_total" if cuda else "self_cpu_time_total"
    table = averages.table(sort_by=sort_by, row_limit=TOP_OPS, max_name_column_width=70)
    Path(table_path).write_text(table + "\n")

    def self_us(event: object) -> float:
        return _self_device_us(event) if cuda else float(getattr(event, "self_cpu_time_total", 0.0))

    ops = [e for e in averages if not str(e.key).startswith("bench.")]
    total_us = sum(self_us(e) for e in ops) or 1.0
    ranked = sorted(ops, key=self_us, reverse=True)[:TOP_OPS]
    phases = {
        str(e.key): {
            "calls": int(e.count),
            "cpu_total_ms": float(e.cpu_time_total) / US_PER_MS,
            "device_total_ms": float(getattr(e, "device_time_total", 0.0)) / US_PER_MS,
        }
        for e in averages
        if str(e.key).startswith("bench.")
    }
    return {
        "table": str(table_path),
        "gpu_time": gpu_time,
        "ranked_by": "self device time" if cuda else "self CPU time",
        "total_ms": total_us / US_PER_MS,
        "phases": phases,
        "top_ops": [
            {
                "op": str(e.key),
                "calls": int(e.count),
                "self_ms": self_us(e) / US_PER_MS,
                "share": self_us(e) / total_us,
            }
            for e in ranked
        ],
    }
