"""Where a phase's wall time goes on the GPU: kernel-busy vs idle, by kind of kernel.

Reads a profiler trace in the Chrome trace format (what `torch.profiler.profile.export_chrome_trace`
writes). Each `bench.<phase>` range recorded on the host (record_function) is a window: the step is
synchronized at its end, so every kernel it launched ran inside it. For every phase: the windows'
total wall time, the time at least one kernel was running (the union of kernel intervals clipped to
the window), the rest (idle: host work, launches, synchronization), and the busy time split by
kind of kernel and by the top kernel names. Idle splits into lead (before the first kernel), tail
(after the last) and gaps between kernels, attributed to the kernel that ended each gap (a kernel
the host launched late).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["KINDS", "PhaseTime", "kernel_kind", "phase_times", "table"]

PHASE_PREFIX = "bench."
TOP_KERNELS = 8
US_PER_MS = 1e3

# (kind, name fragments), first match wins: cuDNN's attention kernel names contain "fprop" too
KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention", ("sdpa", "fmha", "flash", "attention")),
    ("conv", ("fprop", "conv", "implicit_gemm", "winograd")),
    ("gemm", ("gemm", "nvjet", "cutlass", "cublas")),
    ("triton", ("triton",)),
    ("copy", ("copy", "cat", "memcpy", "memset")),
    ("reduce", ("reduce", "norm")),
    ("elementwise", ("elementwise", "vectorized", "unrolled")),
)
_DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def kernel_kind(name: str) -> str:
    lowered = name.lower()
    for kind, fragments in KINDS:
        if any(fragment in lowered for fragment in fragments):
            return kind
    return "other"


@dataclass
class PhaseTime:
    """GPU time of one phase over all its windows (milliseconds)."""

    calls: int = 0
    wall_ms: float = 0.0
    busy_ms: float = 0.0
    lead_ms: float = 0.0  # idle before a window's first kernel (host work, launch latency)
    tail_ms: float = 0.0  # idle after its last kernel (synchronization, host work)
    by_kind_ms: dict[str, float] = field(default_factory=dict)
    top_kernels_ms: dict[str, float] = field(default_factory=dict)
    gaps_before_ms: dict[str, float] = field(default_factory=dict)  # idle inside, by the kernel it ended at

    @property
    def idle_ms(self) -> float:
        return self.wall_ms - self.busy_ms

    def summary(self) -> dict[str, object]:
        return {
            "calls": self.calls,
            "wall_ms": round(self.wall_ms, 3),
            "busy_ms": round(self.busy_ms, 3),
            "idle_ms": round(self.idle_ms, 3),
            "lead_ms": round(self.lead_ms, 3),
            "tail_ms": round(self.tail_ms, 3),
            "by_kind_ms": {k: round(v, 3) for k, v in sorted(self.by_kind_ms.items(), key=lambda kv: -kv[1])},
            "top_kernels_ms": {k: round(v, 3) for k, v in self.top_kernels_ms.items()},
            "gaps_before_ms": {k: round(v, 3) for k, v in self.gaps_before_ms.items()},
        }


def _union_us(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def phase_times(trace: Mapping[str, object]) -> dict[str, PhaseTime]:
    """Per `bench.<phase>` name (without the prefix): wall, busy and idle time, busy time by kind."""
    events = trace.get("traceEvents", [])
    assert isinstance(events, list)
    windows: list[tuple[str, float, float]] = []
    kernels: list[tuple[float, float, str]] = []
    for event in events:
        if not isinstance(event, dict) or "dur" not in event:
            continue
        start, dur = float(event["ts"]), float(event["dur"])
        name, category = str(event.get("name", "")), event.get("cat")
        if category == "user_annotation" and name.startswith(PHASE_PREFIX):
            windows.append((name.removeprefix(PHASE_PREFIX), start, start + dur))
        elif category in _DEVICE_CATEGORIES:
            kernels.append((start, start + dur, name))
    kernels.sort()
    phases: dict[str, PhaseTime] = defaultdict(PhaseTime)
    per_name: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    per_gap: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for phase, begin, end in windows:
        inside = [(max(s, begin), min(e, end), n) for s, e, n in kernels if e > begin and s < end]
        record = phases[phase]
        record.calls += 1
        record.wall_ms += (end - begin) / US_PER_MS
        record.busy_ms += _union_us([(s, e) for s, e, _ in inside]) / US_PER_MS
        if not inside:
            record.lead_ms += (end - begin) / US_PER_MS
            continue
        record.lead_ms += (inside[0][0] - begin) / US_PER_MS
        record.tail_ms += (end - max(e for _, e, _ in inside)) / US_PER_MS
        reached = inside[0][0]
        for s, e, name in inside:
            kind = kernel_kind(name)
            record.by_kind_ms[kind] = record.by_kind_ms.get(kind, 0.0) + (e - s) / US_PER_MS
            per_name[phase][name] += (e - s) / US_PER_MS
            if s > reached:
                per_gap[phase][name] += (s - reached) / US_PER_MS
            reached = max(reached, e)
    for phase, names in per_name.items():
        phases[phase].top_kernels_ms = _top(names)
    for phase, names in per_gap.items():
        phases[phase].gaps_before_ms = _top(names)
    return dict(phases)


def _top(ms_by_name: dict[str, float]) -> dict[str, float]:
    top = sorted(ms_by_name.items(), key=lambda kv: -kv[1])[:TOP_KERNELS]
    return {name[:100]: ms for name, ms in top}


def table(phases: dict[str, PhaseTime]) -> str:
    """A plain-text table: one row per phase, then each phase's kinds and top kernels."""
    lines = [f"{'phase':<10}{'calls':>6}{'wall ms':>11}{'busy ms':>11}{'idle ms':>11}{'idle %':>8}"
             f"{'lead ms':>10}{'tail ms':>10}"]
    for name, p in sorted(phases.items()):
        share = 100.0 * p.idle_ms / p.wall_ms if p.wall_ms else 0.0
        lines.append(f"{name:<10}{p.calls:>6}{p.wall_ms:>11.1f}{p.busy_ms:>11.1f}{p.idle_ms:>11.1f}{share:>8.1f}"
                     f"{p.lead_ms:>10.1f}{p.tail_ms:>10.1f}")
    for name, p in sorted(phases.items()):
        lines.append(f"\n{name}: busy by kind of kernel (ms, summed over calls)")
        lines.extend(f"  {kind:<12}{ms:>10.1f}" for kind, ms in sorted(p.by_kind_ms.items(), key=lambda kv: -kv[1]))
        lines.append(f"{name}: top kernels (ms)")
        lines.extend(f"  {ms:>10.1f}  {kernel}" for kernel, ms in p.top_kernels_ms.items())
        lines.append(f"{name}: idle between kernels, by the kernel that ended the wait (ms)")
        lines.extend(f"  {ms:>10.1f}  {kernel}" for kernel, ms in p.gaps_before_ms.items())
    return "\n".join(lines) + "\n"
