"""Admission: the `AdmissionPolicy` protocol, the KV-pool check, the measured duty-cycle cost model
and its policies (cost model, duty tracker, metrics), built from the config in `build`."""

from sessiond.admission.baselines import FifoPolicy, OnePerGpuPolicy
from sessiond.admission.build import (
    POLICIES,
    build_admission,
    calibration_batches,
    kv_budget_from_pool,
    make_policy,
)
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
from sessiond.admission.kvpool import KVPoolAdmission
from sessiond.admission.metrics import AdmissionMetrics
from sessiond.admission.policy import DutyPolicy, PolicyBase
from sessiond.admission.runtime import AdmissionRuntime, demand_states

__all__ = [
    "POLICIES",
    "AdmissionConfigError",
    "AdmissionMetrics",
    "AdmissionPolicy",
    "AdmissionRequest",
    "AdmissionRuntime",
    "CostModel",
    "CostModelError",
    "Decision",
    "DemandState",
    "DemandSync",
    "DutyPolicy",
    "DutyPriors",
    "DutyTracker",
    "FifoPolicy",
    "KVPoolAdmission",
    "KvBudget",
    "Objectives",
    "OnePerGpuPolicy",
    "OverrunAction",
    "PolicyBase",
    "build_admission",
    "calibrate",
    "calibration_batches",
    "context_bucket",
    "demand_states",
    "kv_budget_from_pool",
    "make_policy",
]
