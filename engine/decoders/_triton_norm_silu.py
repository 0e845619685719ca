"""One-pass channel RMS norm + SiLU for channels-last activations, written straight into a conv's
input buffer, and a one-pass bias + residual add (Triton kernels; CUDA only, and only where Triton
imports).

Eager PyTorch spends ~7 passes over each activation on Wan's norm + SiLU (norm, clamp, divide,
scale, SiLU) and one more copying the result behind the causal conv's history frames. Here each
program loads a tile of positions x all channels (contiguous in channels-last), reduces over the
channels in fp32 and stores SiLU(x / max(||x||, eps) * gamma) once, into `out`, which may be a
frame-offset view of a larger (B, C, T', h, w) buffer: 1 read + 1 write.
"""

from __future__ import annotations

import os

import torch

__all__ = ["add_bias_residual_", "norm_silu_into", "norm_silu_usable"]

EPS = 1e-12  # F.normalize's
TILE = 4096  # elements per program: positions x channels (padded to a power of two)

try:  # Triton ships with CUDA builds of torch; CPU-only installs have none
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the install
    triton = None

# Triton picks its CPU interpreter when a kernel is decorated (at this module's import), so read
# the switch once here rather than on every call
_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


def norm_silu_usable(x: torch.Tensor) -> bool:
    """True when the kernel can run on x: Triton imports, x is a CUDA tensor (or Triton runs in its
    CPU interpreter, TRITON_INTERPRET=1, as in the tests) and x is channels-last per sample."""
    if triton is None or x.dim() != 5 or not _dense_channels_last(x):
        return False
    return x.is_cuda or _INTERPRETED


if triton is not None:

    @triton.jit
    def _norm_silu_kernel(  # type: ignore[no-untyped-def]  # Triton reads no annotations but constexpr
        x_ptr, gamma_ptr, bias_ptr, out_ptr, rows, rows_per_batch, x_batch_stride, out_batch_stride, channels, eps,
        BLOCK_ROWS: tl.constexpr, BLOCK_CHANNELS: tl.constexpr, HAS_BIAS: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
        col = tl.arange(0, BLOCK_CHANNELS)
        batch = row // rows_per_batch
        within = row % rows_per_batch
        mask = (row < rows)[:, None] & (col < channels)[None, :]
        x_at = x_ptr + (batch * x_batch_stride + within * channels)[:, None] + col[None, :]
        x = tl.load(x_at, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            x += tl.load(bias_ptr + col, mask=col < channels, other=0.0).to(tl.float32)[None, :]
        norm = tl.maximum(tl.sqrt(tl.sum(x * x, axis=1)), eps)
        gamma = tl.load(gamma_ptr + col, mask=col < channels, other=0.0).to(tl.float32)
        y = x / norm[:, None] * gamma[None, :]
        y = y * tl.sigmoid(y)
        out_at = out_ptr + (batch * out_batch_stride + within * channels)[:, None] + col[None, :]
        tl.store(out_at, y.to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _bias_residual_kernel(h_ptr, bias_ptr, skip_ptr, n, channels, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
        mask = at < n
        h = tl.load(h_ptr + at, mask=mask, other=0.0).to(tl.float32)
        skip = tl.load(skip_ptr + at, mask=mask, other=0.0).to(tl.float32)
        bias = tl.load(bias_ptr + at % channels, mask=mask, other=0.0).to(tl.float32)
        tl.store(h_ptr + at, (h + bias + skip).to(h_ptr.dtype.element_ty), mask=mask)


def _dense_channels_last(t: torch.Tensor) -> bool:
    """Each sample of (B, C, T, h, w) is one dense (T, h, w, C) row-major block (dims of size 1
    may carry any stride)."""
    _, channels, _, height, width = t.shape
    expected = (1, height * width * channels, width * channels, channels)
    return all(size == 1 or stride == want
               for size, stride, want in zip(t.shape[1:], t.stride()[1:], expected, strict=True))


def norm_silu_into(x: torch.Tensor, gamma: torch.Tensor, out: torch.Tensor, bias: torch.Tensor | None = None) -> None:
    """out <- SiLU(y / ||y||_channels * gamma), y = x (+ bias per channel), for x, out (B, C, T, h, w)
    laid out channels-last per sample (out may be a frame slice of a bigger buffer); gamma (C,)
    already includes sqrt(C)."""
    if triton is None:
        raise RuntimeError("norm_silu_into needs Triton; check norm_silu_usable() first")
    if x.shape != out.shape or x.dim() != 5:
        raise ValueError(f"x {tuple(x.shape)} and out {tuple(out.shape)} must be equal 5-D shapes")
    if not (_dense_channels_last(x) and _dense_channels_last(out)):
        raise ValueError("x and out must be channels-last within each sample (torch.channels_last_3d)")
    batch, channels, frames, height, width = x.shape
    rows_per_batch = frames * height * width
    rows = batch * rows_per_batch
    if rows == 0:
        return
    block_channels = triton.next_power_of_2(channels)
    block_rows = max(1, TILE // block_channels)
    grid = (triton.cdiv(rows, block_rows),)
    _norm_silu_kernel[grid](
        x, gamma.contiguous(), gamma if bias is None else bias.contiguous(), out, rows, rows_per_batch,
        x.stride(0), out.stride(0), channels, EPS,
        BLOCK_ROWS=block_rows, BLOCK_CHANNELS=block_channels, HAS_BIAS=bias is not None,
    )


def add_bias_residual_(h: torch.Tensor, bias: torch.Tensor | None, skip: torch.Tensor) -> torch.Tensor:
    """h <- h + bias (per channel) + skip in one pass, in place; returns h. For (B, C, T, h, w)
    tensors both dense channels-last (else eager PyTorch, two passes)."""
    channels_last = torch.channels_last_3d
    if (triton is None or bias is None or h.shape != skip.shape or not h.is_contiguous(memory_format=channels_last)
            or not skip.is_contiguous(memory_format=channels_last) or not norm_silu_usable(h)):
        if bias is not None:
            h.add_(bias.view(1, -1, 1, 1, 1))
        return h.add_(skip)
    n = h.numel()
    _bias_residual_kernel[(triton.cdiv(n, TILE),)](h, bias.contiguous(), skip, n, h.shape[1], BLOCK=TILE)
    return h
