"""The replay report of docs/traces.md (every field; null for a statistic without samples) and its table."""

from __future__ import annotations

from typing import Any

from loadtest.replay.percentiles import summarize
from loadtest.replay.runner import ReplayOutcome

__all__ = ["REQUIRED_FIELDS", "build_report", "format_table"]

# the fields docs/traces.md requires, as (key, sub-keys)
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "trace": (), "url": (), "speed": (), "started_at": (), "duration_s": (),
    "sessions": ("total", "admitted", "rejected", "failed"),
    "frames": ("received", "expected", "deadline_misses", "miss_rate"),
    "ttff_ms": ("p50", "p95", "max"), "segment_ms": ("p50", "p95", "max"),
    "action_to_photon_ms": ("p50", "p95", "max"), "interrupt_ms": ("p50", "p95"),
    "stale_frames_after_ack": (), "slo": (), "slo_met": (), "per_session": (),
    "start_delay_ms": ("p50", "p95", "max"), "stalls": ("count", "seconds"),
}
REPORT_VERSION = 2  # 2: start_delay_ms and stalls; the director objective is start delay and no stall


def _fps_series(outcome: ReplayOutcome, bin_s: float = 1.0) -> dict[str, list[float]]:
    times = sorted(t for r in outcome.results for t in r.frame_times_s)
    bins = int(outcome.duration_s // bin_s) + 1
    counts = [0] * bins
    for t in times:
        counts[min(bins - 1, int(t // bin_s))] += 1
    return {"t": [round(i * bin_s, 3) for i in range(bins)], "fps": [c / bin_s for c in counts]}


def _segments(admitted: list[Any]) -> dict[str, Any]:
    judged = sum(r.segments_judged for r in admitted)
    missed = sum(r.segments_missed for r in admitted)
    return {"judged": judged, "missed": missed, "missed_share": missed / judged if judged else None}


def build_report(outcome: ReplayOutcome, policy: str | None = None) -> dict[str, Any]:
    results, objectives = outcome.results, outcome.objectives
    admitted = [r for r in results if r.status == "admitted"]
    received = sum(r.frames_received for r in results)
    misses = sum(r.deadline_misses for r in results)
    stale = sum(r.stale_frames_after_ack for r in results)
    within = [r for r in admitted if r.within_objective(objectives)]
    failed = sum(1 for r in results if r.status == "failed")
    capacity = outcome.capacity or {}
    admission = capacity.get("admission") if isinstance(capacity.get("admission"), dict) else {}
    return {
        "version": REPORT_VERSION,
        "trace": outcome.trace.header.name,
        "url": outcome.url,
        "speed": outcome.speed,
        "started_at": outcome.started_at,
        "duration_s": outcome.duration_s,
        "mode": outcome.mode,
        "policy": policy or (admission or {}).get("policy") or capacity.get("policy"),
        "sessions": {"total": len(results), "admitted": len(admitted),
                     "rejected": sum(1 for r in results if r.status == "rejected"), "failed": failed,
                     "within_objective": len(within), "outside_objective": len(admitted) - len(within)},
        "frames": {"received": received, "expected": sum(r.frames_expected for r in results),
                   "deadline_misses": misses, "miss_rate": misses / received if received else None},
        "ttff_ms": summarize(x for r in results for x in r.ttff_ms),
        "segment_ms": summarize(x for r in results for x in r.segment_ms),
        "action_to_photon_ms": summarize(x for r in results for x in r.action_to_photon_ms),
        "interrupt_ms": summarize((x for r in results for x in r.interrupt_ms), ("p50", "p95")),
        "start_delay_ms": summarize(x for r in results for x in r.start_delay_ms),
        "stalls": {"count": sum(r.stalls for r in results), "seconds": round(sum(r.stall_s for r in results), 3)},
        # director segments of admitted sessions: how many were judged and the share that missed (start
        # delay over its bound, a stall, or no answer): the figure the admission's stated risk is about
        "segments": _segments(admitted),
        "stale_frames_after_ack": stale,
        "pts_errors": sum(r.pts_errors for r in results),
        "events": {"sent": sum(r.events_sent for r in results), "skipped": sum(r.events_skipped for r in results)},
        "slo": objectives.to_json(),
        "slo_met": stale == 0 and failed == 0 and len(within) == len(admitted),
        "per_session": [{**r.to_json(objectives), "server_errors": outcome.errors.get(r.key, {})} for r in results],
        "timeline": {**outcome.timeline, "frames_per_s": _fps_series(outcome)},
        "admissions": sorted(({"t": r.admitted_at_s, "key": r.key, "status": r.status} for r in results),
                             key=lambda a: (a["t"] is None, a["t"] or 0.0)),
        "capacity": outcome.capacity,
    }


def _ms(stat: dict[str, Any], key: str) -> str:
    value = stat.get(key)
    return "-" if value is None else f"{value:.0f}"


def format_table(report: dict[str, Any]) -> str:
    s, f = report["sessions"], report["frames"]
    miss = "-" if f["miss_rate"] is None else f"{f['miss_rate']:.2%}"
    lines = [
        f"trace {report['trace']}  policy {report.get('policy') or '?'}  {report['mode']} x{report['speed']:g}  "
        f"{report['duration_s']:.1f} s",
        f"sessions  total {s['total']}  admitted {s['admitted']}  rejected {s['rejected']}  failed {s['failed']}  "
        f"within objective {s['within_objective']}",
        f"frames    received {f['received']}  expected {f['expected']}  deadline misses {f['deadline_misses']} ({miss})",
        f"{'latency ms':<20}{'p50':>8}{'p95':>8}{'max':>8}",
    ]
    for name in ("ttff_ms", "start_delay_ms", "segment_ms", "action_to_photon_ms", "interrupt_ms"):
        stat = report[name]
        lines.append(f"{name[:-3]:<20}{_ms(stat, 'p50'):>8}{_ms(stat, 'p95'):>8}{_ms(stat, 'max'):>8}")
    stalls = report["stalls"]
    lines.append(f"stalls {stalls['count']} ({stalls['seconds']:.1f} s)   stale frames after ack "
                 f"{report['stale_frames_after_ack']}   slo met {report['slo_met']}")
    for row in report["per_session"]:  # co-play: one line per seat (docs/traces.md, "Co-play")
        for seat in row.get("players", ()):
            a2p = seat["action_to_photon_ms"]
            lines.append(f"{row['key']} player {seat['player']}: actions {seat['actions_sent']}  applied seq "
                         f"{seat['applied_seq']}/{seat['last_seq_sent']}  frames {seat['frames_received']}  "
                         f"a2p p50 {_ms(a2p, 'p50')} p95 {_ms(a2p, 'p95')} ms")
    return "\n".join(lines)
