"""Building the engine for `serve`: the configured model, or tiny when the demo model's weights
are absent (said in the log and in /v1/capacity). Runs on the engine thread."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

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


def demo_weights() -> Path | None:
    """Where the shipped demo weights are declared to live (None when the config says nowhere)."""
    from engine.config import get_config

    declared = get_config("demo").extra.get("default_weights")
    return Path(str(declared)) if declared else None


def build_engine(config: ServeConfig) -> BuiltEngine:
    from engine.engine import Engine

    device = config.device or default_device()
    threads = config.engine_threads(device)
    if threads is not None:
        logger.info("engine on %s with %d torch thread(s)", device, threads)
    weights: Path | None = None
    if config.model == "demo":
        weights = demo_weights()
        if weights is None or not weights.is_file():
            why = (f"the demo model's weights are absent ({weights or 'no path declared'}); "
                   "serving the tiny test model instead")
            logger.warning("%s", why)
            engine = Engine.create(model="tiny", device=device, kv_budget_bytes=config.kv_budget_bytes,
                                   cpu_threads=threads, max_batch=config.max_batch)
            return BuiltEngine(engine, "tiny", why)
    try:
        engine = Engine.create(model=config.model, device=device, kv_budget_bytes=config.kv_budget_bytes,
                               weights=weights, cpu_threads=threads, max_batch=config.max_batch)
    except EngineError as exc:
        raise RuntimeError(f"cannot build model {config.model!r} on {device}: {exc}") from exc
    return BuiltEngine(engine, config.model, None)
