"""Attention backends: PyTorch SDPA always; two batched matrix products around a softmax
("matmul") on CPUs; flash-attn when it imports on CUDA; FP8 on Hopper.

Chosen by configuration ("sdpa" | "matmul" | "flash" | "fp8") or by measurement ("auto": the exact
backends are timed on the model's real shapes at warmup and the faster wins; on the H200 flash-attn
2 measured 1.8x slower than SDPA's cuDNN kernel, and on a CPU without AMX SDPA's bf16 flash kernel
2.8x slower than "matmul" at the demo model's shapes, so a name alone decides nothing). "fp8" is lossy
(`engine.attention_fp8`: e4m3 Q/K/V with per-block scales), so "auto" never picks it: a
deployment opts in after reading its fidelity numbers. Layout everywhere: (B, L, heads, d).
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from engine.errors import ConfigError

__all__ = ["ATTENTION_CHOICES", "AttentionBackend", "available_backends", "measure_backends"]

logger = logging.getLogger(__name__)

ATTENTION_CHOICES = ("auto", "sdpa", "matmul", "flash", "fp8")

AttnFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    # mask: bool (B, 1, Lq, Lk), True = attend
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask)
    return out.transpose(1, 2)


def _matmul(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v as two batched GEMMs: exact attention (the scores are materialised,
    (B, heads, Lq, Lk), so only for short sequences: the CPU's chunk-sized calls). On a CPU with
    AVX512-BF16 the bf16 GEMMs run at several times the flash kernel's rate at Lq 256, Lk 768. In
    bf16 the scores are rounded to bf16 before the softmax: on the demo model's q/k/v the output is
    8e-3 from fp64 against SDPA-bf16's 2e-3, and end to end within the bf16 path's own drift from
    fp32 (demo/MODEL_CARD.md, speed section)."""
    if mask is not None:  # the masked full-sequence forward (training, references) stays on SDPA
        return _sdpa(q, k, v, mask)
    scores = torch.matmul(q.transpose(1, 2) * q.shape[-1] ** -0.5, k.permute(0, 2, 3, 1))
    return torch.matmul(scores.softmax(dim=-1), v.transpose(1, 2)).transpose(1, 2)


def _flash_fn() -> AttnFn | None:
    try:
        module = importlib.import_module("flash_attn")
    except ImportError:
        return None
    flash = module.flash_attn_func

    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if mask is not None:  # padded batches need a mask: SDPA handles those
            return _sdpa(q, k, v, mask)
        return flash(q, k, v)  # type: ignore[no-any-return]

    return run


def _fp8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is not None:  # the masked full-sequence forward (training, references) stays exact
        return _sdpa(q, k, v, mask)
    from engine.attention_fp8 import fp8_attention

    return fp8_attention(q, k, v)


def _fp8_available(device: torch.device) -> bool:
    if device.type != "cuda":
        return False
    from engine.attention_fp8 import fp8_attention_usable

    return fp8_attention_usable(torch.empty(1, 1, 1, 128, device=device))


_MATMUL_DTYPES = (torch.bfloat16, torch.float16)


def available_backends(device: torch.device, dtype: torch.dtype = torch.bfloat16) -> list[str]:
    """The exact backends "auto" measures on `device` at `dtype`. "matmul" only on CPUs (on a GPU its
    scores for a 480x832 chunk would take gigabytes) and only in 16-bit, where it is the 2.8x win: in
    fp32 the two run within the timer's noise of each other, so a measurement would pick either from
    one process to the next and two runs of one seed would differ in the last bits."""
    names = ["sdpa"]
    if device.type == "cpu" and dtype in _MATMUL_DTYPES:
        names.append("matmul")
    if device.type == "cuda" and _flash_fn() is not None:
        names.append("flash")
    return names


@dataclass
class AttentionBackend:
    """The attention function the model calls; `name` says which one and `timings` why."""

    name: str = "sdpa"
    timings: dict[str, float] = field(default_factory=dict)
    _fn: AttnFn = _sdpa

    @classmethod
    def create(cls, choice: str, device: torch.device) -> AttentionBackend:
        if choice not in ATTENTION_CHOICES:
            raise ConfigError("bad_attention", f"attention {choice!r} is not one of {list(ATTENTION_CHOICES)}")
        if choice == "flash":
            fn = _flash_fn() if device.type == "cuda" else None
            if fn is None:
                raise ConfigError(
                    "attention_unavailable", "attention='flash' needs flash-attn installed and a CUDA device; "
                    "use 'sdpa' or 'auto'"
                )
            return cls(name="flash", _fn=fn)
        if choice == "fp8":
            if not _fp8_available(device):
                raise ConfigError(
                    "attention_unavailable", "attention='fp8' needs Triton and a CUDA device of compute "
                    "capability >= 8.9 (Hopper, Ada); use 'sdpa' or 'auto'"
                )
            return cls(name="fp8", _fn=_fp8)
        if choice == "matmul":
            return cls(name="matmul", _fn=_matmul)
        return cls(name="sdpa")  # "auto" starts as SDPA until measured

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self._fn(q, k, v, mask)

    def select(self, name: str) -> None:
        fn = {"sdpa": _sdpa, "matmul": _matmul, "fp8": _fp8}.get(name) or _flash_fn()
        if fn is None:
            raise ConfigError("attention_unavailable", f"attention backend {name!r} is not importable here")
        self.name, self._fn = name, fn


def measure_backends(
    device: torch.device, dtype: torch.dtype, q_len: int, kv_len: int, heads: int, head_dim: int,
    batch: int = 1, repeats: int = 5,
) -> dict[str, float]:
    """Median seconds of one attention call per available backend on these shapes."""
    gen = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(batch, q_len, heads, head_dim, device=device, dtype=dtype, generator=gen)
    k = torch.randn(batch, kv_len, heads, head_dim, device=device, dtype=dtype, generator=gen)
    v = torch.randn_like(k)
    results: dict[str, float] = {}
    for name in available_backends(device, dtype):
        backend = AttentionBackend()
        backend.select(name)
        backend(q, k, v)  # warm
        times = []
        for _ in range(repeats):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            backend(q, k, v)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - start)
        results[name] = sorted(times)[len(times) // 2]
    logger.info("attention backends measured: %s", results)
    return results
