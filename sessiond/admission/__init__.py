"""Admission by a measured duty-cycle cost model: cost model, duty tracker, policies, metrics."""

from sessiond.admission.baselines import FifoPolicy, OnePerGpuPolicy
from sessiond.admission.calibrate import calibrate
from sessiond.admission.costmodel import CostModel, context_bucket
from sessiond.admission.decision import (
    AdmissionPolicy,
    AdmissionRequest,
    Decision,
    KvBudget,
    Objectives,
    OverrunAction,
)
from sessiond.admission.demand import DemandState, DemandSync
from sessiond.admission.duty import DutyPriors, DutyTracker
from sessiond.admission.errors import AdmissionConfigError, CostModelError
from sessiond.admission.factory import POLICIES, make_policy
from sessiond.admission.metrics import AdmissionMetrics
from sessiond.admission.policy import DutyPolicy, PolicyBase

__all__ = [
    "POLICIES",
    "AdmissionConfigError",
    "AdmissionMetrics",
    "AdmissionPolicy",
    "AdmissionRequest",
    "CostModel",
    "CostModelError",
    "Decision",
    "DemandState",
    "DemandSync",
    "DutyPolicy",
    "DutyPriors",
    "DutyTracker",
    "FifoPolicy",
    "KvBudget",
    "Objectives",
    "OnePerGpuPolicy",
    "OverrunAction",
    "PolicyBase",
    "calibrate",
    "context_bucket",
    "make_policy",
]
