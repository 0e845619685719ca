"""`--policy duty|one-per-gpu|fifo`: build the admission policy the daemon runs with."""

from __future__ import annotations

from typing import Any

from sessiond.admission.baselines import FifoPolicy, OnePerGpuPolicy
from sessiond.admission.costmodel import CostModel
from sessiond.admission.duty import DutyTracker
from sessiond.admission.errors import AdmissionConfigError
from sessiond.admission.policy import DutyPolicy, PolicyBase

__all__ = ["POLICIES", "make_policy"]

POLICIES: dict[str, type[PolicyBase]] = {"duty": DutyPolicy, "one-per-gpu": OnePerGpuPolicy, "fifo": FifoPolicy}


def make_policy(name: str, cost: CostModel, tracker: DutyTracker | None = None, **options: Any) -> PolicyBase:
    """A policy by name; options are PolicyBase's keywords (and ``gpus`` for one-per-gpu)."""
    cls = POLICIES.get(name)
    if cls is None:
        raise AdmissionConfigError("policy", f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
    if "gpus" in options and cls is not OnePerGpuPolicy:
        options = {k: v for k, v in options.items() if k != "gpus"}
    return cls(cost, tracker or DutyTracker(), **options)
