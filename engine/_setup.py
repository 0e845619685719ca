"""Building an engine's parts (model, decoder, text encoder, KV pool, RoPE, attention, schedule)
from a model config or catalog name, a device and optional weights."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from engine._fp8_calibration import calibrate_kv_fp8
from engine._host_memory import keep_freed_host_memory
from engine._memory import check_cuda_kv_budget, cuda_kv_budget, measure_decode_working_set
from engine.api import ModelInfo
from engine.attention import AttentionBackend
from engine.attention_fa3 import FP8
from engine.catalog import ModelCatalog
from engine.config import ModelConfig
from engine.decoders import StreamingDecoder
from engine.errors import ConfigError, WeightsError
from engine.kv import ChunkKVPool, SlabGeometry
from engine.model import CausalDiT
from engine.rope import RopeTable
from engine.sampling import Schedule
from engine.text import EmbeddingCache, HashTextEncoder, T5TextEncoder, TextEncoder
from engine.weights import Checkpoint, load_checkpoint, load_dit, parse_dtype

__all__ = ["COMPILE_CHOICES", "EngineParts", "build_parts", "expandable_segments", "parse_device"]

logger = logging.getLogger(__name__)


@dataclass
class EngineParts:
    config: ModelConfig
    device: torch.device
    dtype: torch.dtype
    model: CausalDiT
    decoder: StreamingDecoder
    text_encoder: TextEncoder
    text_cache: EmbeddingCache
    pool: ChunkKVPool
    rope: RopeTable
    attend: AttentionBackend
    schedule: Schedule
    info: ModelInfo
    decoder_device: torch.device | None = None  # where the decoder lives when not on `device` (engine.placement)


def parse_device(device: str) -> torch.device:
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise ConfigError("bad_device", f"device {device!r} is not a torch device; use 'cpu' or 'cuda'") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("bad_device", "device 'cuda' requested but CUDA is not available; use device='cpu'")
    if dev.type not in ("cpu", "cuda"):
        raise ConfigError("bad_device", f"device {device!r} is not supported; use 'cpu' or 'cuda'")
    return dev


def _text_encoder(
    config: ModelConfig, device: torch.device, path: str | None, checkpoint: Checkpoint | None
) -> TextEncoder:
    if path is not None:
        return T5TextEncoder(path, config, device)
    encoder = HashTextEncoder(config)
    encoder.init_random()
    if checkpoint is not None and checkpoint.text:
        from engine.decoders.weights import load_strict

        load_strict(encoder, checkpoint.text, "text encoder")
    return encoder.to(device).eval()


def expandable_segments() -> None:
    """Let the CUDA caching allocator grow segments instead of carving fixed ones: with the KV pool,
    decoder activations at max_batch and DiT activations interleaved, fixed segments fragmented
    (on the H200: 48 GiB reserved but unusable, a 6.9 GiB decode buffer refused). The allocator
    reads this when CUDA first allocates, so it only applies if nothing has yet; an explicit
    PYTORCH_CUDA_ALLOC_CONF is left alone."""
    if not torch.cuda.is_initialized():
        os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")


COMPILE_CHOICES = ("auto", "on", "off")
FP8_CALIBRATION_PROMPT = "a wide landscape with a path, trees and sky"


def _compile_wanted(mode: str, device: torch.device) -> bool:
    if mode not in COMPILE_CHOICES:
        raise ConfigError("bad_compile", f"compile {mode!r} is not one of {list(COMPILE_CHOICES)}")
    return mode == "on" or (mode == "auto" and device.type == "cuda")


def _kv_budget(config: ModelConfig, session_bytes: int, device: torch.device, budget: int | None,
               decoder: StreamingDecoder, dtype: torch.dtype, decoder_device: torch.device | None = None) -> int:
    if device.type == "cuda":
        working = measure_decode_working_set(decoder, config, decoder_device or device).with_cross(config, dtype)
        free, _ = torch.cuda.mem_get_info(device)
        if budget is None:
            budget = cuda_kv_budget(free, working, session_bytes, config)
        else:
            check_cuda_kv_budget(budget, free, working, session_bytes, config)
    elif budget is None:
        budget = config.default_kv_sessions * session_bytes
    if budget < session_bytes:
        raise ConfigError(
            "kv_budget_too_small", f"kv_budget_bytes {budget} holds no session; one needs {session_bytes} bytes"
        )
    return budget


def _prompt_examples(config: ModelConfig) -> tuple[str, ...]:
    """The example prompts a model config names in `extra["prompt_examples"]` (strings), else none."""
    examples = config.extra.get("prompt_examples", ())
    if not isinstance(examples, tuple | list):
        return ()
    return tuple(e for e in examples if isinstance(e, str) and e)


def _lead_chunks(config: ModelConfig) -> float:
    """The world lead a model config advises in `extra["lead_chunks"]` (a positive number), else 2."""
    lead = config.extra.get("lead_chunks", 2.0)
    if not isinstance(lead, int | float) or isinstance(lead, bool) or lead <= 0:
        raise ConfigError("bad_lead_chunks", f"model {config.name!r}: extra['lead_chunks'] must be a positive "
                          f"number, got {lead!r}")
    return float(lead)


def build_parts(
    config_or_name: str | ModelConfig,
    catalog: ModelCatalog,
    device_name: str,
    dtype_name: str | torch.dtype | None,
    weights: str | Path | None,
    kv_budget_bytes: int | None,
    attention: str,
    decoder_weights: str | Path | None,
    text_encoder_path: str | None,
    init_seed: int,
    compile_mode: str = "auto",
    max_batch: int | None = None,
    decoder_device: torch.device | None = None,
) -> EngineParts:
    config = config_or_name if isinstance(config_or_name, ModelConfig) else catalog.config(config_or_name)
    if max_batch is not None:
        if max_batch < 1:
            raise ConfigError("bad_max_batch", f"max_batch must be >= 1, got {max_batch}")
        config = config.with_overrides(max_batch=max_batch)
    device = parse_device(device_name)
    if device.type == "cuda":
        expandable_segments()
    elif device.type == "cpu":
        logger.info("host allocator keeps freed memory: %s", keep_freed_host_memory())
    dtype = parse_dtype(dtype_name, device)
    attend = AttentionBackend.create(attention, device)
    checkpoint = load_checkpoint(weights) if weights is not None else None
    with torch.device("meta"):
        model = CausalDiT(config)
    model = model.to_empty(device=device).to(dtype)
    model.init_random(init_seed)  # defined values everywhere, also where a checkpoint has no keys
    if checkpoint is not None:
        load_dit(model, checkpoint.dit)
    model.eval().requires_grad_(False)
    if config.cuda_graphs and device.type != "cuda":
        raise ConfigError("graphs_need_cuda", f"model {config.name!r} asks for cuda_graphs; use device='cuda' "
                          "or a config without them")
    if config.fp8_ffn:
        model.quantize_ffn()
    if config.fp8_proj:
        model.quantize_projections()
    encoder = _text_encoder(config, device, text_encoder_path, checkpoint)
    text_cache = EmbeddingCache(encoder, config.text_cache_entries)
    rope = model.new_rope(device)
    schedule = Schedule.from_config(config)
    if attend.fp8:  # fixed per-layer scales, measured in the compute dtype before compiling
        with torch.no_grad():
            prompt = model.embed_text(text_cache.get(FP8_CALIBRATION_PROMPT).to(device)[None])[0]
        model.set_kv_fp8(calibrate_kv_fp8(model, rope, schedule, prompt))
    if _compile_wanted(compile_mode, device):
        model.compile_blocks()
    decoder = catalog.build_decoder(config, decoder_device or device, dtype)
    if checkpoint is not None and checkpoint.decoder:
        decoder.load_weights(checkpoint.decoder)
    if decoder_weights is not None:
        try:
            decoder.load_weights(load_file(str(decoder_weights)))
        except (SafetensorError, OSError) as exc:
            raise WeightsError("weights_unreadable", f"decoder weights {str(decoder_weights)!r}: {exc}") from exc
    kv_dtype = FP8 if attend.fp8 else dtype
    geometry = SlabGeometry(config.num_layers, config.tokens_per_chunk, config.num_heads, config.head_dim, kv_dtype)
    session_bytes = geometry.slab_bytes * config.context_chunks
    # a decoder on another device leaves this one's memory to the KV pool, but its working set is
    # still measured (on its own device) and kept free here: conservative, and one code path
    pool = ChunkKVPool(geometry, _kv_budget(config, session_bytes, device, kv_budget_bytes, decoder, dtype,
                                            decoder_device), device)
    info = ModelInfo(
        name=config.name,
        width=config.width,
        height=config.height,
        fps=config.fps,
        frames_per_chunk=decoder.frames_for(config.latent_frames_per_chunk, first=False),
        first_chunk_frames=decoder.frames_for(config.latent_frames_per_chunk, first=True),
        latent_frames_per_chunk=config.latent_frames_per_chunk,
        denoise_steps=len(config.denoise_timesteps),
        action_space=config.action_space,
        kv_bytes_per_session=session_bytes,
        kv_dtype=str(kv_dtype).removeprefix("torch."),
        attention=attend.name,
        device=str(device),
        dtype=str(dtype).removeprefix("torch."),
        prompt_examples=_prompt_examples(config),
        lead_chunks=_lead_chunks(config),
    )
    return EngineParts(
        config=config, device=device, dtype=dtype, model=model, decoder=decoder, text_encoder=encoder,
        text_cache=text_cache, pool=pool, rope=rope, attend=attend, schedule=schedule, info=info,
        decoder_device=decoder_device,
    )
