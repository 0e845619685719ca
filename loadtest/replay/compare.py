"""The comparison that justifies the design: the same traces on the same model under each admission
policy. Per policy one daemon is started as a user starts it (`sessiond serve`, its own process, its
own start-up calibration) and every trace is replayed against it from this process, one client per
session, the traces back to back.

Per trace and policy it reports sessions admitted / rejected / failed, sessions within and outside
objective, the p95s, and the share of director segments that missed; beside them the analytic
capacity the calibration allows (ANALYTIC_FORMULA), and for a family of traces one table and a plot."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtest.replay.daemon_process import DaemonSpec, serve_args, served, until_idle
from loadtest.replay.family_report import family_rows, format_family, write_family_plot
from loadtest.replay.plots import write_plots
from loadtest.replay.report import build_report, format_table
from loadtest.replay.runner import run_replay
from loadtest.replay.served_cost import cost_model_of
from loadtest.trace_tools.trace_duty import trace_stats
from sessiond.admission.build import make_policy
from sessiond.admission.costmodel import CostModel
from sessiond.admission.decision import Objectives
from sessiond.admission.duty import DutyTracker
from sessiond.traces.format import Trace

__all__ = ["ANALYTIC_FORMULA", "CompareConfig", "analytic_capacity", "compare_row", "format_comparison",
           "run_comparison", "trace_capacity"]

ANALYTIC_FORMULA = (
    "c(k) = engine seconds per media second of one session when k generate together (the calibrated "
    "cost at the cheapest batch <= k); rho = 1 for world, for directors the slowest rate whose start delay "
    "max(cm/r, cm + L(1/r - 1)) + jitter meets the objective; a group of k is feasible under EDF when "
    "k x rho x c(k) <= 1 - margin. all_at_once: the largest N feasible with every session demanding at once; "
    "at_risk: the largest N whose sessions, demanding independently at the trace's measured duty d, find "
    "themselves in an infeasible group with probability P(Binomial(N - 1, d) >= g - 1) <= the objective's "
    "tolerance (g the smallest infeasible group) and N x d x c <= 1 - margin; mean_load_bound: the largest N "
    "with N x d x rho x c(N d) <= 1 (no margin, no burst: an upper bound no scheduler beats)")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompareConfig:
    model: str = "tiny"
    device: str = "cpu"
    policies: tuple[str, ...] = ("duty", "one-per-gpu", "fifo")
    margin: float | None = None  # the daemon's --admission-margin (None: its default)
    max_batch: int = 8
    speed: float = 1.0
    mode: str = "paced"
    objectives: Objectives = field(default_factory=Objectives)
    kv_budget_bytes: int | None = None  # the engine's KV pool; None: the engine's default
    cpu_threads: int | None = None
    serve_extra: tuple[str, ...] = ()  # further `sessiond serve` flags for every daemon
    out_dir: str | None = None

    def spec(self, policy: str) -> DaemonSpec:
        return DaemonSpec(model=self.model, device=self.device, policy=policy, max_batch=self.max_batch,
                          margin=self.margin, objectives=self.objectives, kv_budget_bytes=self.kv_budget_bytes,
                          cpu_threads=self.cpu_threads, extra=self.serve_extra)


def compare_row(report: dict[str, Any]) -> dict[str, Any]:
    s = report["sessions"]
    return {"policy": report["policy"], "admitted": s["admitted"], "rejected": s["rejected"], "failed": s["failed"],
            "within_objective": s["within_objective"], "outside_objective": s["outside_objective"],
            "ttff_p95_ms": report["ttff_ms"]["p95"], "segment_p95_ms": report["segment_ms"]["p95"],
            "start_delay_p95_ms": report["start_delay_ms"]["p95"], "stalls": report["stalls"]["count"],
            "action_to_photon_p95_ms": report["action_to_photon_ms"]["p95"], "miss_rate": report["frames"]["miss_rate"],
            "segments_judged": report["segments"]["judged"], "segments_missed_share": report["segments"]["missed_share"],
            "stale_frames_after_ack": report["stale_frames_after_ack"], "slo_met": report["slo_met"]}


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 1 else f"{value:.0f}"
    return str(value)


def format_comparison(rows: Sequence[dict[str, Any]]) -> str:
    cols = ("policy", "admitted", "rejected", "failed", "within_objective", "outside_objective", "ttff_p95_ms",
            "start_delay_p95_ms", "stalls", "segment_p95_ms", "action_to_photon_p95_ms", "miss_rate",
            "stale_frames_after_ack")
    heads = ("policy", "admit", "reject", "fail", "in-obj", "out-obj", "ttff95", "start95", "stalls", "seg95", "a2p95",
             "miss", "stale")
    widths = [max(len(h), *(len(_cell(r[c])) for r in rows)) + 2 for c, h in zip(cols, heads, strict=True)]
    lines = ["".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))]
    lines += ["".join(_cell(r[c]).rjust(w) for c, w in zip(cols, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def analytic_capacity(cost: CostModel, trace: Trace, *, margin: float, objectives: Objectives, max_batch: int,
                      segment_s: float = 5.0) -> dict[str, Any]:
    """What the measured cost allows for this trace's sessions, per mode (ANALYTIC_FORMULA), so
    that the policies' rows can be read against it independently of the engine's speed; and for the
    whole trace (`sessions`): per mode the trace's sessions or its capacity, whichever is fewer, and
    for a trace of both modes the sessions that fit when each mode's share of the GPU is its share
    of sessions over its capacity (1 / sum of share_m / capacity_m, at most the trace's sessions)."""
    stats = trace_stats(trace, segment_s)
    out: dict[str, Any] = {"formula": ANALYTIC_FORMULA, "margin": margin, "per_mode": {}}
    for mode in ("world", "director"):
        duty = stats.mean_duty(mode)
        if duty is None:
            continue
        policy = make_policy("duty", copy.deepcopy(cost), DutyTracker(), objectives=objectives, margin=margin,
                             max_batch=max_batch, segment_s=segment_s)
        model = policy.group_model()
        rho = 1.0 if mode == "world" else model.director_rate
        own = (1, 0) if mode == "world" else (0, 1)
        all_at_once = 0
        while all_at_once < 64 and model.feasible(own[0] * (all_at_once + 1), own[1] * (all_at_once + 1)):
            all_at_once += 1
        mean_bound = 0
        while mean_bound < 256:
            n = mean_bound + 1
            if n * duty * rho * policy.group_cost_rate(max(1, round(n * duty))) > 1.0:
                break
            mean_bound = n
        out["per_mode"][mode] = {
            "sessions_in_trace": sum(1 for s in stats.sessions if s.mode == mode), "duty": round(duty, 4),
            "required_rate": rho, "cost_rate": {str(b): policy.cost.cost_rate(b) for b in range(1, max_batch + 1)},
            "all_at_once": all_at_once, "at_risk": policy.mode_capacity(mode, duty=duty),
            "mean_load_bound": mean_bound}
    out["sessions"] = trace_capacity(out["per_mode"])
    return out


def trace_capacity(per_mode: dict[str, dict[str, Any]]) -> int:
    """Sessions of the trace the analytic capacity allows (see analytic_capacity)."""
    counts = {m: f["sessions_in_trace"] for m, f in per_mode.items()}
    total = sum(counts.values())
    if total == 0:
        return 0
    if any(per_mode[m]["at_risk"] <= 0 for m in counts if counts[m]):
        return sum(min(n, per_mode[m]["at_risk"]) for m, n in counts.items())
    if len([m for m in counts if counts[m]]) == 1:
        mode = next(m for m in counts if counts[m])
        return min(counts[mode], int(per_mode[mode]["at_risk"]))
    load_per_session = sum(counts[m] / total / per_mode[m]["at_risk"] for m in counts)
    return min(total, int(1.0 / load_per_session + 1e-9))


def _replay_one(trace: Trace, url: str, cfg: CompareConfig, policy: str, folder: Path | None,
                say: Callable[[str], None]) -> dict[str, Any]:
    say(f"policy {policy}: replaying {trace.header.name} ({len(trace.sessions())} sessions, "
        f"{trace.duration_s:.0f} s, {cfg.mode})")
    outcome = asyncio.run(run_replay(trace, url, speed=cfg.speed, mode=cfg.mode, objectives=cfg.objectives))
    report = build_report(outcome, policy=policy)
    say(format_table(report))
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.json").write_text(json.dumps(report, indent=1))
        write_plots(outcome, report, folder)
    if not asyncio.run(until_idle(url)):
        say(f"  warning: the {policy} daemon still holds sessions 60 s after {trace.header.name}")
    return report


def run_comparison(traces: Sequence[Trace], cfg: CompareConfig, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Per policy: one `sessiond serve` process (its own start-up calibration), every trace replayed
    against it in turn from this process. Returns (and writes to out_dir/compare.json) the rows per
    trace and policy, each daemon's calibration and the analytic capacity of each trace."""
    out = Path(cfg.out_dir) if cfg.out_dir else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    daemons: dict[str, Any] = {}
    per_trace: dict[str, dict[str, Any]] = {t.header.name: {"rows": [], "stats": None} for t in traces}
    cost: CostModel | None = None
    margin = cfg.margin
    for policy in cfg.policies:
        log = out / f"daemon-{policy}.log" if out is not None else None
        with served(cfg.spec(policy), log) as daemon:
            say(f"policy {policy}: `sessiond serve` pid {daemon.pid} ready after {daemon.ready_after_s:.1f} s "
                f"at {daemon.url}")
            admission = daemon.capacity.get("admission") or {}
            daemons[policy] = {"pid": daemon.pid, "ready_after_s": daemon.ready_after_s,
                               "serve_args": serve_args(cfg.spec(policy), 0),
                               "calibration": admission.get("cost_model"), "margin": admission.get("margin"),
                               "serves_at_start": admission.get("serves")}
            if cost is None:
                with contextlib.suppress(ValueError):
                    cost = cost_model_of(daemon.capacity)
                    margin = float(admission.get("margin", 0.15)) if margin is None else margin
            for trace in traces:
                folder = out / policy / trace.header.name if out is not None else None
                report = _replay_one(trace, daemon.url, cfg, policy, folder, say)
                per_trace[trace.header.name]["rows"].append(compare_row(report))
    for trace in traces:
        entry = per_trace[trace.header.name]
        entry["header"] = {"description": trace.header.description, "generator": trace.header.generator}
        entry["analytic_capacity"] = (analytic_capacity(cost, trace, margin=margin if margin is not None else 0.15,
                                                        objectives=cfg.objectives, max_batch=cfg.max_batch)
                                      if cost is not None else None)
    result: dict[str, Any] = {"traces": list(per_trace), "model": cfg.model, "device": cfg.device, "margin": margin,
                              "max_batch": cfg.max_batch, "mode": cfg.mode, "speed": cfg.speed,
                              "objectives": cfg.objectives.to_json(), "daemons": daemons, "per_trace": per_trace,
                              "family": family_rows(per_trace)}
    if out is not None:
        (out / "compare.json").write_text(json.dumps(result, indent=1))
        (out / "family.md").write_text(format_family(result["family"]) + "\n")
        write_family_plot(result["family"], out / "family.png")
    for name, entry in per_trace.items():
        say(f"--- {name}\n{format_comparison(entry['rows'])}")
        for mode, figures in ((entry["analytic_capacity"] or {}).get("per_mode") or {}).items():
            say(f"analytic capacity, {mode} at duty {figures['duty']}: {figures['at_risk']} within the stated risk, "
                f"{figures['all_at_once']} all at once, at most {figures['mean_load_bound']} by the mean load")
    say(format_family(result["family"]))
    return result
