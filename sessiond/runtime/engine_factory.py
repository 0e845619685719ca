"""Building the engine for `serve`: the configured model, or tiny when the demo model's weights
are absent (said in the log and in /v1/capacity). Runs on the engine thread."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.api import EngineProtocol
from engine.errors import EngineError
from sessiond.config import ServeConfig
from sessiond.runtime.strategy import ENGINE, MachineFacts, ReplicaPlan, Strategy

if TYPE_CHECKING:  # the catalog module imports torch: the engine thread loads it
    import numpy as np

    from engine.catalog import ModelCatalog
    from engine.placement import DecoderPlacement

__all__ = ["BuiltEngine", "build_engine", "default_device", "demo_dtype", "machine_facts", "picture_check"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuiltEngine:
    engine: EngineProtocol
    model: str  # the model actually serving
    fallback: str | None  # why it is not the configured one, when it is not


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def model_catalog() -> ModelCatalog:
    """The models `serve` can run: the engine core's and the demo family's."""
    from demo.registration import catalog_with_demo

    return catalog_with_demo()


def demo_weights(catalog: ModelCatalog) -> Path | None:
    """Where the shipped demo weights are declared to live (None when the config says nowhere)."""
    declared = catalog.config("demo").extra.get("default_weights")
    return Path(str(declared)) if declared else None


_NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # /proc/cpuinfo flags of CPUs with bf16 matrix instructions


def demo_dtype(device: str, cpuinfo: str | None = None) -> str | None:
    """The demo model's dtype on ``device``: bfloat16 on a CPU with native bf16 matrix instructions
    (AMX or AVX512-BF16; ``cpuinfo``: the text of /proc/cpuinfo, read when not given), else the
    engine's default (float32 on CPUs, where bf16 without them is emulated and several times
    slower). Measured on the 2-core AMX box, 1 thread: 25.7-26.9 frames/s against 16.4-17.2 for
    float32, with the same evaluation (direction 0.98, themes 0.96; demo/MODEL_CARD.md)."""
    if device != "cpu":
        return None
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    flags = {word for line in cpuinfo.splitlines() if line.startswith("flags") for word in line.split()}
    return "bfloat16" if any(flag in flags for flag in _NATIVE_BF16_FLAGS) else None


def picture_check(model: str) -> Callable[[np.ndarray], Any] | None:
    """The served model family's check of one decoded frame (sessiond.session.picture), or None
    when the family has none: the demo model can tell a lost avatar and a collapsed picture."""
    if model != "demo":
        return None
    from demo.picture import check_frame

    return check_frame


def _placement(plan: ReplicaPlan | None) -> DecoderPlacement | None:
    if plan is None or plan.decoder_mode == "inline":
        return None
    from engine.placement import DecoderPlacement

    return DecoderPlacement(plan.decoder_mode, plan.decoder_device, plan.decoder_threads)


def _served_model(config: ServeConfig, catalog: ModelCatalog) -> str:
    """The model `build_engine` will serve: the configured one, or tiny for a demo without weights."""
    if config.model == "demo":
        weights = demo_weights(catalog)
        if weights is None or not weights.is_file():
            return "tiny"
    return config.model


def machine_facts(config: ServeConfig, strategy: Strategy) -> MachineFacts:
    """What `strategy.check_machine` checks against: this machine's GPUs and the model's KV per
    session on the engine's device (its dtype as `build_engine` picks it; an fp8 KV cache is
    smaller, so the check may only be stricter than the engine's own)."""
    import torch

    from engine.errors import EngineError
    from engine.kv import SlabGeometry
    from engine.weights import parse_dtype

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    gpu_bytes = {i: torch.cuda.get_device_properties(i).total_memory for i in range(gpus)}
    device = strategy.engine.device if strategy.engine.device != ENGINE else (config.device or default_device())
    catalog = model_catalog()
    try:
        model = catalog.config(_served_model(config, catalog))
    except EngineError as exc:
        raise RuntimeError(f"cannot check the strategy against model {config.model!r}: {exc}") from exc
    torch_device = torch.device("cuda" if device.startswith("cuda") else "cpu")
    named = demo_dtype(device) if config.model == "demo" else None
    dtype = parse_dtype(named, torch_device)
    geometry = SlabGeometry(model.num_layers, model.tokens_per_chunk, model.num_heads, model.head_dim, dtype)
    session = geometry.slab_bytes * model.context_chunks
    default = model.default_kv_sessions * session if torch_device.type == "cpu" else None
    return MachineFacts(device, gpus, gpu_bytes, config.kv_budget_bytes, session, default)


def _own_stream(device: str) -> None:
    """Make a CUDA stream of its own this (engine) thread's current stream: replicas sharing a GPU
    then queue their work apart instead of in the one default stream, and each waits only for its own."""
    import torch

    torch.cuda.set_stream(torch.cuda.Stream(torch.device(device)))


def build_engine(config: ServeConfig, plan: ReplicaPlan | None = None) -> BuiltEngine:
    """The configured engine; `plan` (a strategy's replica) sets its device, KV budget and decoder placement;
    with `pace_profile`, each step paced to that profile times `pace_scale` (sessiond/runtime/paced_engine.py)."""
    built = _build_engine(config, plan)
    if config.pace_profile is None:
        return built
    from sessiond.runtime.paced_engine import PacedEngine, PaceProfile

    profile = PaceProfile.load(config.pace_profile).scaled(config.pace_scale)
    model = built.engine.config  # type: ignore[attr-defined]
    media_s = model.frames_per_chunk / model.fps
    scale = media_s / profile.chunk_media_s
    logger.info("engine steps paced to %s (%s, %.2f media s per chunk; this model %.2f: x%.3f)", profile.source,
                profile.model, profile.chunk_media_s, media_s, scale)
    return BuiltEngine(PacedEngine(built.engine, profile, scale), built.model, built.fallback)  # type: ignore[arg-type]


def _build_engine(config: ServeConfig, plan: ReplicaPlan | None) -> BuiltEngine:
    from engine.engine import Engine

    catalog = model_catalog()
    device = (plan.device if plan is not None and plan.device else None) or config.device or default_device()
    kv_budget = plan.kv_budget_bytes if plan is not None else config.kv_budget_bytes
    placement = _placement(plan)
    if plan is not None and plan.own_stream and device.startswith("cuda"):
        _own_stream(device)
    threads = config.engine_threads(device)
    if threads is not None:
        logger.info("engine on %s with %d torch thread(s)", device, threads)
    weights: Path | None = None
    if config.model == "demo":
        weights = demo_weights(catalog)
        if weights is None or not weights.is_file():
            why = (f"the demo model's weights are absent ({weights or 'no path declared'}); "
                   "serving the tiny test model instead")
            logger.warning("%s", why)
            engine = Engine.create(model="tiny", catalog=catalog, device=device, kv_budget_bytes=kv_budget,
                                   cpu_threads=threads, max_batch=config.max_batch, decoder_placement=placement,
                                   attention=config.attention)
            return BuiltEngine(engine, "tiny", why)
    try:
        dtype = demo_dtype(device) if config.model == "demo" else None
        if dtype is not None:
            logger.info("demo model in %s: this CPU has bf16 matrix instructions", dtype)
        engine = Engine.create(model=config.model, catalog=catalog, device=device, kv_budget_bytes=kv_budget,
                               weights=weights, cpu_threads=threads, max_batch=config.max_batch, dtype=dtype,
                               decoder_placement=placement, attention=config.attention)
    except EngineError as exc:
        raise RuntimeError(f"cannot build model {config.model!r} on {device}: {exc}") from exc
    return BuiltEngine(engine, config.model, None)
