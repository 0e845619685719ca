"""Building the engine for `serve`: the configured model, or tiny when the demo model's weights
are absent (said in the log and in /v1/capacity). Runs on the engine thread."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.api import EngineProtocol
from engine.errors import EngineError
from sessiond.config import ServeConfig

__all__ = ["BuiltEngine", "build_engine", "default_device"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuiltEngine:
    engine: EngineProtocol
    model: str  # the model actually serving
    fallback: str | None  # why it is not the configured one, when it is not


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _weights_missing(exc: BaseException) -> bool:
    if isinstance(exc, FileNotFoundError):
        return True
    return isinstance(exc, EngineError) and ("weight" in exc.code or "missing" in exc.code
                                             or "not_found" in exc.code)


def build_engine(config: ServeConfig) -> BuiltEngine:
    from engine.engine import Engine

    device = config.device or default_device()
    try:
        engine = Engine.create(model=config.model, device=device, kv_budget_bytes=config.kv_budget_bytes)
        return BuiltEngine(engine, config.model, None)
    except (EngineError, FileNotFoundError) as exc:
        if config.model != "demo" or not _weights_missing(exc):
            raise
        why = f"the demo model's weights are absent ({exc}); serving the tiny test model instead"
        logger.warning("%s", why)
        engine = Engine.create(model="tiny", device=device, kv_budget_bytes=config.kv_budget_bytes)
        return BuiltEngine(engine, "tiny", why)
