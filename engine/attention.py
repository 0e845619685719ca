"""Attention backends: PyTorch SDPA always; two batched matrix products around a softmax
("matmul") on CPUs; flash-attn 2 or FlashAttention-3 ("fa3") when they import on CUDA; FP8.

Chosen by configuration ("sdpa" | "matmul" | "flash" | "fa3" | "fp8" | "fp8_triton") or by
measurement ("auto": the exact backends are timed on the model's real shapes at warmup and the
fastest wins; on the H200 flash-attn 2 measured 1.8x slower than SDPA's cuDNN kernel, and on a CPU
without AMX SDPA's bf16 flash kernel 2.8x slower than "matmul" at the demo model's shapes, so a name
alone decides nothing). "fa3" and "fp8" also take packed samples of different key lengths in one call
(`AttentionBackend.packed`, FA3's variable-length interface).

FP8 is lossy, so "auto" never picks it: a deployment opts in after reading its fidelity numbers.
"fp8": q, k, v arrive in e4m3 with per-head scales (`engine.model.kv_fp8`) and the KV cache holds
e4m3 (half the bytes), so it is chosen when the engine is built; FA3's FP8 kernel on CUDA, the exact
reference on the dequantized inputs on a CPU (`engine.attention_fa3`). "fp8_triton": bf16 q, k, v
and KV cache, quantized per block inside a Triton kernel (`engine.attention_fp8`; slower than cuDNN's
bf16 kernel on the H200). Layout everywhere: (B, L, heads, d).
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import torch
import torch.nn.functional as F

from engine.api import ATTENTION_CHOICES
from engine.attention_fa3 import (
    FA3_INSTALL_HINT,
    FP8,
    Descale,
    Packing,
    PackingCache,
    fa3_attention,
    fa3_attention_lse,
    fa3_module,
    reference_attention,
    reference_attention_lse,
)
from engine.errors import ConfigError

__all__ = ["ATTENTION_CHOICES", "AttentionBackend", "available_backends", "measure_backends"]

logger = logging.getLogger(__name__)

_FA3_NAMES = ("fa3", "fp8")  # the backends that run FA3 (or its reference) and take packed samples

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


def _fp8_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is not None:  # the masked full-sequence forward (training, references) stays exact
        return _sdpa(q, k, v, mask)
    from engine.attention_fp8 import fp8_attention

    return fp8_attention(q, k, v)


def _fp8_triton_available(device: torch.device) -> bool:
    if device.type != "cuda":
        return False
    from engine.attention_fp8 import fp8_attention_usable

    return fp8_attention_usable(torch.empty(1, 1, 1, 128, device=device))


def _fa3_for(choice: str, device: torch.device) -> ModuleType | None:
    """FA3's module for "fa3" (CUDA only) and "fp8" (CUDA; a CPU runs the exact reference: None)."""
    if device.type == "cpu" and choice == "fp8":
        return None
    module = fa3_module() if device.type == "cuda" else None
    if module is None:
        detail = "a CUDA device" if device.type != "cuda" else "the FA3 kernels, which do not import here"
        raise ConfigError("attention_unavailable", f"attention={choice!r} needs {detail}. {FA3_INSTALL_HINT}. "
                          "Or use 'sdpa' or 'auto'" + ("; 'fp8' also runs on a CPU (exact reference)"
                                                        if choice == "fp8" else ""))
    return module


_MATMUL_DTYPES = (torch.bfloat16, torch.float16)


def available_backends(device: torch.device, dtype: torch.dtype = torch.bfloat16) -> list[str]:
    """The exact backends "auto" measures on `device` at `dtype`. "matmul" only on CPUs (on a GPU its
    scores for a 480x832 chunk would take gigabytes) and only in 16-bit, where it is the 2.8x win: in
    fp32 the two run within the timer's noise of each other, so a measurement would pick either from
    one process to the next and two runs of one seed would differ in the last bits. "fa3" on CUDA in
    bf16 when its package imports."""
    names = ["sdpa"]
    if device.type == "cpu" and dtype in _MATMUL_DTYPES:
        names.append("matmul")
    if device.type == "cuda" and _flash_fn() is not None:
        names.append("flash")
    if device.type == "cuda" and dtype == torch.bfloat16 and fa3_module() is not None:
        names.append("fa3")
    return names


@dataclass
class AttentionBackend:
    """The attention function the model calls; `name` says which one and `timings` why.

    Call it as `attend(q, k, v, mask=None, descale=None)` over a uniform batch, or
    `attend.packed(q, k, v, key_lengths, descale=None)` over samples of different key lengths when
    `packs` is True. `fp8`: q, k, v must come in e4m3 with their `Descale`."""

    name: str = "sdpa"
    timings: dict[str, float] = field(default_factory=dict)
    _fn: AttnFn = _sdpa
    _fa3: ModuleType | None = None  # FA3's interface module; None with "fp8" on a CPU (reference)
    _packings: dict[torch.device, PackingCache] = field(default_factory=dict)
    auto: bool = False  # "auto": warm-up measures the exact backends and keeps the fastest

    @classmethod
    def create(cls, choice: str, device: torch.device) -> AttentionBackend:
        if choice not in ATTENTION_CHOICES:
            raise ConfigError("bad_attention", f"attention {choice!r} is not one of {list(ATTENTION_CHOICES)}")
        if choice == "flash":
            fn = _flash_fn() if device.type == "cuda" else None
            if fn is None:
                raise ConfigError(
                    "attention_unavailable", "attention='flash' needs flash-attn installed and a CUDA device; "
                    "use 'sdpa', 'fa3' or 'auto'"
                )
            return cls(name="flash", _fn=fn)
        if choice in _FA3_NAMES:
            return cls(name=choice, _fa3=_fa3_for(choice, device))
        if choice == "fp8_triton":
            if not _fp8_triton_available(device):
                raise ConfigError(
                    "attention_unavailable", "attention='fp8_triton' needs Triton and a CUDA device of compute "
                    "capability >= 8.9 (Hopper, Ada); use 'sdpa', 'fp8' or 'auto'"
                )
            return cls(name="fp8_triton", _fn=_fp8_triton)
        if choice == "matmul":
            return cls(name="matmul", _fn=_matmul)
        return cls(name="sdpa", auto=choice == "auto")  # "auto" starts as SDPA until measured

    @property
    def fp8(self) -> bool:
        """q, k, v and the KV cache are e4m3 (fixed when the engine is built)."""
        return self.name == "fp8"

    @property
    def packs(self) -> bool:
        """One call serves samples of different key lengths (`packed`)."""
        return self.name in _FA3_NAMES

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
        descale: Descale | None = None,
    ) -> torch.Tensor:
        if q.dtype == FP8 and (mask is not None or self.name not in _FA3_NAMES):
            # the masked full-sequence forward (training, references): exact on the dequantized inputs
            assert descale is not None, "e4m3 q, k, v need their Descale"
            qf, kf, vf = (x.float() * s.float()[:, None] for x, s in ((q, descale.q), (k, descale.k), (v, descale.v)))
            return _sdpa(qf, kf, vf, mask).to(torch.bfloat16)
        if self.name in _FA3_NAMES and mask is None:
            return self._kernel(q, k, v, descale, None)
        return self._fn(q, k, v, mask)

    def packed(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_lengths: list[int],
               descale: Descale | None = None) -> torch.Tensor:
        """q (B, Lq, heads, d); k and v (sum(key_lengths), heads, d), sample i's keys at
        [sum(key_lengths[:i]), + key_lengths[i]) -> (B, Lq, heads, d) contiguous."""
        if not self.packs:
            raise ConfigError("attention_cannot_pack", f"attention {self.name!r} takes no packed samples")
        batch, queries = q.shape[:2]
        cache = self._packings.get(q.device)
        if cache is None:
            cache = self._packings[q.device] = PackingCache(q.device)
        packing = cache.get([queries] * batch, key_lengths)
        out = self._kernel(q.reshape(batch * queries, *q.shape[2:]), k, v, descale, packing)
        return out.view(batch, queries, *out.shape[1:])

    def with_lse(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, descale: Descale | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """A uniform batch's output and each query row's softmax log-sum-exp ((B, heads, Lq) fp32,
        natural log), for merging calls over parts of the keys: FA3's op on CUDA, the exact
        reference on a CPU. Only the FA3 backends ("fa3", "fp8")."""
        if self.name not in _FA3_NAMES:
            raise ConfigError("attention_no_lse", f"attention {self.name!r} does not return its log-sum-exp")
        if self._fa3 is not None:
            return fa3_attention_lse(self._fa3, q, k, v, descale)
        return reference_attention_lse(q, k, v, descale)

    def _kernel(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, descale: Descale | None,
                packing: Packing | None) -> torch.Tensor:
        if self._fa3 is not None:
            return fa3_attention(self._fa3, q, k, v, descale, packing)
        return reference_attention(q, k, v, descale, packing)

    def select(self, name: str) -> None:
        """Switch to another backend of the same precision (warm-up's measurement, the benchmark)."""
        if self.fp8 != (name == "fp8"):
            raise ConfigError("attention_precision", f"attention {self.name!r} -> {name!r} changes the KV cache's "
                              "precision (e4m3 for 'fp8', bf16 otherwise): build an engine with that attention")
        if name in _FA3_NAMES:
            module = self._fa3 if self.name in _FA3_NAMES and self._fa3 is not None else fa3_module()
            if module is None and name == "fa3":
                raise ConfigError("attention_unavailable", f"attention 'fa3' is not importable here. {FA3_INSTALL_HINT}")
            self.name, self._fn, self._fa3 = name, _sdpa, module
            return
        fn = {"sdpa": _sdpa, "matmul": _matmul, "fp8_triton": _fp8_triton}.get(name) or _flash_fn()
        if fn is None:
            raise ConfigError("attention_unavailable", f"attention backend {name!r} is not importable here")
        self.name, self._fn, self._fa3 = name, fn, None


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
