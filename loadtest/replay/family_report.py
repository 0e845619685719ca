"""One table and one plot for a family of traces replayed under each policy: per trace and policy the
sessions admitted, within and outside objective, the analytic capacity beside them, start delay p95,
stalls, the world deadline-miss rate and the share of admitted director segments that missed."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["family_rows", "family_summary", "format_family", "write_family_plot"]

_COLUMNS = (("trace", "trace"), ("policy", "policy"), ("sessions", "sessions"), ("admitted", "admitted"),
            ("within_objective", "within"), ("outside_objective", "outside"), ("analytic", "analytic"),
            ("within_over_analytic", "within/analytic"), ("start_delay_p95_ms", "start delay p95 ms"),
            ("stalls", "stalls"), ("miss_rate", "world miss rate"),
            ("segments_missed_share", "director segments missed"))


def family_rows(per_trace: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (trace, policy), in trace order then policy order."""
    rows = []
    for name, entry in per_trace.items():
        analytic = (entry.get("analytic_capacity") or {}).get("sessions")
        for row in entry["rows"]:
            sessions = row["admitted"] + row["rejected"] + row["failed"]
            rows.append({"trace": name, "policy": row["policy"], "sessions": sessions, "admitted": row["admitted"],
                         "within_objective": row["within_objective"], "outside_objective": row["outside_objective"],
                         "analytic": analytic,
                         "within_over_analytic": row["within_objective"] / analytic if analytic else None,
                         "start_delay_p95_ms": row["start_delay_p95_ms"], "stalls": row["stalls"],
                         "miss_rate": row["miss_rate"], "segments_missed_share": row["segments_missed_share"]})
    return rows


def family_summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per policy: traces, sessions admitted outside objective in all, the traces with any, and the mean
    of within / analytic over the traces whose analytic capacity is at least one."""
    out: dict[str, dict[str, Any]] = {}
    for policy in dict.fromkeys(r["policy"] for r in rows):
        mine = [r for r in rows if r["policy"] == policy]
        ratios = [min(1.0, r["within_over_analytic"]) for r in mine if r["within_over_analytic"] is not None]
        out[policy] = {"traces": len(mine), "outside_objective": sum(r["outside_objective"] for r in mine),
                       "traces_with_outside": [r["trace"] for r in mine if r["outside_objective"]],
                       "mean_within_over_analytic": statistics.fmean(ratios) if ratios else None}
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.0f}"
    return str(value)


def format_family(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of the rows, then a line per policy from family_summary (the within / analytic
    mean counts a trace at most 1.0: serving more than the analysis allows is no credit)."""
    lines = ["| " + " | ".join(head for _, head in _COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    lines += ["| " + " | ".join(_cell(r[key]) for key, _ in _COLUMNS) + " |" for r in rows]
    for policy, s in family_summary(rows).items():
        lines.append(f"\n{policy}: {s['traces']} traces, {s['outside_objective']} sessions admitted outside objective"
                     f" ({', '.join(s['traces_with_outside']) or 'none'}), within / analytic capacity "
                     f"{_cell(s['mean_within_over_analytic'])} on average")
    return "\n".join(lines)


def write_family_plot(rows: list[dict[str, Any]], path: Path) -> Path:
    """Per trace: the analytic capacity (outline) and, per policy, the sessions within objective with
    those admitted outside it stacked above in red."""
    traces = list(dict.fromkeys(r["trace"] for r in rows))
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    fig = Figure(figsize=(max(8.0, 0.9 * len(traces) * max(1, len(policies))), 5.5), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(policies))
    by_key = {(r["trace"], r["policy"]): r for r in rows}
    for j, policy in enumerate(policies):
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(traces))]
        within = [by_key[(t, policy)]["within_objective"] if (t, policy) in by_key else 0 for t in traces]
        outside = [by_key[(t, policy)]["outside_objective"] if (t, policy) in by_key else 0 for t in traces]
        ax.bar(xs, within, width, label=f"{policy}: within objective", alpha=0.85)
        ax.bar(xs, outside, width, bottom=within, color="tab:red", label="admitted outside objective" if j == 0 else None)
    analytic = [next((r["analytic"] for r in rows if r["trace"] == t), None) or 0 for t in traces]
    ax.bar(range(len(traces)), analytic, 0.9, fill=False, edgecolor="black", linestyle="--", label="analytic capacity")
    ax.set_xticks(range(len(traces)), traces, rotation=30, ha="right")
    ax.set_ylabel("sessions")
    ax.set_title("trace family: sessions within objective against the analytic capacity")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=100)
    return path
