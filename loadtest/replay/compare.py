"""The comparison that justifies the design: the same trace on the same engine
under each admission policy, one daemon after another, each replayed with one client per session.

Per policy it reports sessions admitted / rejected / failed, sessions served within objective and
the p95s; the cost model is calibrated once on the engine and each policy starts from a copy."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtest.replay.live_daemon import policy_daemon
from loadtest.replay.plots import write_plots
from loadtest.replay.report import build_report, format_table
from loadtest.replay.runner import run_replay
from loadtest.trace_tools.trace_duty import trace_stats
from sessiond.admission.build import calibration_batches, kv_budget_from_pool, make_policy
from sessiond.admission.calibrate import calibrate
from sessiond.admission.costmodel import CostModel
from sessiond.admission.decision import Objectives
from sessiond.admission.duty import DutyPriors, DutyTracker
from sessiond.traces.format import Trace

__all__ = ["ANALYTIC_FORMULA", "CompareConfig", "analytic_capacity", "compare_row", "format_comparison",
           "run_comparison"]

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
    margin: float = 0.15
    max_batch: int = 8
    speed: float = 1.0
    mode: str = "paced"
    objectives: Objectives = field(default_factory=Objectives)
    priors_from_trace: bool = False
    duty_window_s: float = 60.0
    calibration_chunks: int = 3
    kv_budget_bytes: int | None = None  # the engine's KV pool; None: the engine's default
    out_dir: str | None = None


def compare_row(report: dict[str, Any]) -> dict[str, Any]:
    s = report["sessions"]
    return {"policy": report["policy"], "admitted": s["admitted"], "rejected": s["rejected"], "failed": s["failed"],
            "within_objective": s["within_objective"], "outside_objective": s["outside_objective"],
            "ttff_p95_ms": report["ttff_ms"]["p95"], "segment_p95_ms": report["segment_ms"]["p95"],
            "start_delay_p95_ms": report["start_delay_ms"]["p95"], "stalls": report["stalls"]["count"],
            "action_to_photon_p95_ms": report["action_to_photon_ms"]["p95"], "miss_rate": report["frames"]["miss_rate"],
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


def analytic_capacity(cost: CostModel, trace: Trace, cfg: CompareConfig, segment_s: float = 5.0
                      ) -> dict[str, Any]:
    """What the measured cost allows for this trace's sessions, per mode (ANALYTIC_FORMULA), so
    that the policies' rows can be read against it independently of the engine's speed."""
    stats = trace_stats(trace)
    out: dict[str, Any] = {"formula": ANALYTIC_FORMULA, "margin": cfg.margin, "per_mode": {}}
    for mode in ("world", "director"):
        duty = stats.mean_duty(mode)
        if duty is None:
            continue
        policy = make_policy("duty", copy.deepcopy(cost), DutyTracker(), objectives=cfg.objectives, margin=cfg.margin,
                             max_batch=cfg.max_batch, segment_s=segment_s)
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
            "required_rate": rho, "cost_rate": {str(b): policy.cost.cost_rate(b) for b in range(1, cfg.max_batch + 1)},
            "all_at_once": all_at_once, "at_risk": policy.mode_capacity(mode, duty=duty),
            "mean_load_bound": mean_bound}
    return out


def _engine(cfg: CompareConfig) -> Any:
    from engine.engine import Engine
    from sessiond.runtime.engine_factory import model_catalog

    engine = Engine.create(model=cfg.model, catalog=model_catalog(), device=cfg.device, kv_budget_bytes=cfg.kv_budget_bytes,
                           max_batch=cfg.max_batch)
    engine.warmup()
    return engine


def run_comparison(trace: Trace, cfg: CompareConfig, say: Callable[[str], None] = print) -> dict[str, Any]:
    engine = _engine(cfg)
    kv = engine.kv_stats()
    per_session = engine.info.kv_bytes_per_session
    fit = max(1, (kv.slabs_free * kv.slab_bytes) // max(1, per_session))
    say(f"calibrating the cost model of {cfg.model} on {cfg.device} ...")
    cost: CostModel = calibrate(engine, batches=calibration_batches(cfg.max_batch, fit), chunks=cfg.calibration_chunks,
                                progress=lambda d, t, w: say(f"  profile {d}/{t}: {w}") if d == t else None)
    priors = DutyPriors().refreshed(trace_stats(trace)) if cfg.priors_from_trace else DutyPriors()
    budget = kv_budget_from_pool(kv, per_session)
    reports, rows = {}, []
    for name in cfg.policies:
        policy = make_policy(name, copy.deepcopy(cost), DutyTracker(priors, cfg.duty_window_s),
                             objectives=cfg.objectives, kv=budget, margin=cfg.margin, max_batch=cfg.max_batch)
        say(f"policy {name}: replaying {trace.header.name} ({len(trace.sessions())} sessions, "
            f"{trace.duration_s:.0f} s, {cfg.mode})")
        with policy_daemon(engine, policy, model=cfg.model, max_batch=cfg.max_batch) as url:
            outcome = asyncio.run(run_replay(trace, url, speed=cfg.speed, mode=cfg.mode, objectives=cfg.objectives))
        report = build_report(outcome, policy=name)
        report["cost_model"] = policy.cost.snapshot(cfg.max_batch)
        say(format_table(report))
        reports[name] = report
        rows.append(compare_row(report))
        if cfg.out_dir:
            folder = Path(cfg.out_dir) / name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "report.json").write_text(json.dumps(report, indent=1))
            write_plots(outcome, report, folder)
    result: dict[str, Any] = {"trace": trace.header.name, "model": cfg.model, "device": cfg.device, "margin": cfg.margin,
              "max_batch": cfg.max_batch, "mode": cfg.mode, "speed": cfg.speed, "priors": priors.to_json(),
              "objectives": cfg.objectives.to_json(), "calibration": cost.snapshot(cfg.max_batch), "rows": rows,
              "analytic_capacity": analytic_capacity(cost, trace, cfg)}
    if cfg.out_dir:
        (Path(cfg.out_dir) / "compare.json").write_text(json.dumps(result, indent=1))
    say(format_comparison(rows))
    for mode, figures in result["analytic_capacity"]["per_mode"].items():
        say(f"analytic capacity, {mode} at duty {figures['duty']}: {figures['at_risk']} within the stated risk, "
            f"{figures['all_at_once']} all at once, at most {figures['mean_load_bound']} by the mean load")
    return result
