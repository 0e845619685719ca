"""The spectator benchmark's verdict: levels of the same count pool their owner's samples, the
largest count is held against no spectators, and each target says what it checked."""

from __future__ import annotations

from typing import Any

from loadtest.spectators import _summary


def _row(n: int, a2p: list[float], cpu: float, rss: float, *, ok: int | None = None,
         first: float | None = 0.5) -> dict[str, Any]:
    return {"spectators": n, "owner_a2p_ms": a2p, "owner_a2p_samples": len(a2p),
            "owner_a2p_ms_p50": sorted(a2p)[len(a2p) // 2], "daemon_cpu_cores": cpu, "daemon_rss_mib": rss,
            "spectators_at_15fps": n if ok is None else ok, "first_frame_s_max": first if n else None}


def test_alternating_levels_pool_their_samples() -> None:
    rows = [_row(0, [100.0, 200.0, 300.0], 0.60, 500.0), _row(50, [210.0, 220.0, 230.0], 0.70, 520.0),
            _row(0, [190.0, 200.0, 210.0], 0.64, 510.0), _row(50, [180.0, 190.0, 200.0], 0.74, 530.0)]
    s = _summary(rows)
    assert s["owner_a2p_ms_p50_pooled"] == {"0": 200.0, "50": 205.0, "samples": [6, 6]}
    assert s["owner_a2p_p50_change"] == 0.025
    assert s["cpu_cores_per_spectator"] == 0.002 and s["rss_mib_per_spectator"] == 0.4
    assert s["targets"] == {"every_spectator_at_15fps": True, "owner_a2p_p50_within_10pct": True,
                            "first_frame_within_1s": True}


def test_a_slower_owner_or_a_late_spectator_fails_its_target() -> None:
    rows = [_row(0, [100.0] * 5, 0.6, 500.0), _row(50, [150.0] * 5, 0.7, 520.0, ok=49, first=1.2)]
    s = _summary(rows)
    assert s["owner_a2p_p50_change"] == 0.5
    assert s["targets"] == {"every_spectator_at_15fps": False, "owner_a2p_p50_within_10pct": False,
                            "first_frame_within_1s": False}
