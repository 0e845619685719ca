"""The objectives' flags, shared by `replay` and `replay-compare`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessiond.admission.decision import Objectives

__all__ = ["add_objective_flags", "objectives_from"]


def add_objective_flags(p: Any) -> None:
    p.add_argument("--start-delay-s", type=float, default=1.5,
                   help="director objective: start delay p95 seconds (default 1.5)")
    p.add_argument("--a2p-ms", type=float, default=1500.0, help="world objective: action-to-photon p95 ms (default 1500)")
    p.add_argument("--miss-rate", type=float, default=0.01, help="world objective: deadline-miss rate (default 0.01)")
    p.add_argument("--playout-ms", type=float, default=100.0,
                   help="client jitter allowance before a frame counts late (default 100)")


def objectives_from(args: argparse.Namespace) -> Objectives:
    """Raises AdmissionConfigError naming a bad value."""
    from sessiond.admission.decision import Objectives

    return Objectives(world_deadline_miss=args.miss_rate, world_action_to_photon_p95_ms=args.a2p_ms,
                      director_start_delay_p95_s=args.start_delay_s, playout_ms=args.playout_ms)
