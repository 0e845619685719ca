"""The cost model a served daemon calibrated at start-up, rebuilt from its `/v1/capacity` answer, so
that a client in another process can state what that calibration allows (the analytic capacity)."""

from __future__ import annotations

from typing import Any

from engine.api import ActionSpace, ModelInfo
from sessiond.admission.costmodel import CostModel

__all__ = ["cost_model_of", "served_calibration"]


def served_calibration(capacity: dict[str, Any]) -> dict[str, Any]:
    """The cost-model part of a /v1/capacity answer; raises ValueError when it holds none (a policy
    without a cost model, such as `kv`)."""
    admission = capacity.get("admission")
    cost = admission.get("cost_model") if isinstance(admission, dict) else None
    if not isinstance(cost, dict) or not cost.get("calibrated"):
        raise ValueError("the daemon's /v1/capacity has no calibrated cost model (policy "
                         f"{admission.get('policy') if isinstance(admission, dict) else None!r}); "
                         "start it with a cost-model policy (duty, one-per-gpu or fifo)")
    return cost


def cost_model_of(capacity: dict[str, Any]) -> CostModel:
    """A CostModel holding the served daemon's calibrated seconds per item (batch, context)."""
    cost = served_calibration(capacity)
    engine = capacity["engine"]
    info = ModelInfo(name=str(cost["model"]), width=int(engine["width"]), height=int(engine["height"]),
                     fps=int(engine["fps"]), frames_per_chunk=int(engine["frames_per_chunk"]),
                     latent_frames_per_chunk=0, denoise_steps=int(cost["denoise_steps"]),
                     action_space=ActionSpace(keys=()), kv_bytes_per_session=int(engine["kv_bytes_per_session"]),
                     device=str(engine["device"]), dtype=str(engine["dtype"]),
                     # a daemon before 2026-12-06 planned a whole chunk of lead-in and did not say this
                     first_chunk_frames=int(engine.get("first_chunk_frames", 0)))
    model = CostModel(info, alpha=float(cost["alpha"]))
    for item in cost["items"]:
        model.record(str(item["item"]), int(item["batch"]), int(item["context"]), float(item["seconds"]))
    return model
