"""Gathering K/V slabs by slab ids held on the device (for CUDA graphs, which cannot take host ids).

`gather_slabs(source, index, out)`: out[r, j] = source[index[r, j]] for every sample r and context
slot j; `scatter_slabs(values, index, target)`: target[index[r]] = values[r]; each slab a contiguous
(tokens, heads, d) block. On CUDA a Triton kernel copies whole
slabs in wide vectors (a memcpy's speed). The first graphed pass gathered with torch's
`index_select`, which computes an offset per element: on the H200 that pass came out 1.7 ms slower
than the eager one at 3 context slabs and 6.1 ms at 7, ~1.1 ms more per slab, about 3x the time
a plain copy of that slab's K and V over 30 layers takes. On the CPU (and without Triton)
`index_select` does the copy.
"""

from __future__ import annotations

import os

import torch

from engine.kv.pool import as_bits

__all__ = ["gather_slabs", "scatter_slabs", "triton_gather_usable"]

try:  # Triton ships with CUDA builds of torch; CPU-only installs may have none
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the install
    triton = None

# Triton picks its CPU interpreter when a kernel is decorated (this module's import)
_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
BLOCK = 8192  # elements per program: 16 KiB of bf16


def triton_gather_usable(source: torch.Tensor) -> bool:
    """True when the Triton kernel can run: on CUDA, or in Triton's CPU interpreter (tests)."""
    return triton is not None and (source.is_cuda or _INTERPRETED)


if triton is not None:

    @triton.jit
    def _copy_slabs_kernel(  # type: ignore[no-untyped-def]
        src_ptr, index_ptr, out_ptr, slab_elems, slots, out_slots, out_offset,
        BLOCK: tl.constexpr, GATHER: tl.constexpr,
    ):
        # GATHER: out slab (row, out_offset + slot) <- src slab index[pair];
        # else (scatter): out slab index[pair] <- src slab pair
        pair = tl.program_id(0)  # sample * slots + slot
        part = tl.program_id(1)
        row = pair // slots
        slot = pair % slots
        slab = tl.load(index_ptr + pair).to(tl.int64)
        offs = part.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        inside = offs < slab_elems
        if GATHER:
            source = slab * slab_elems
            target = (row.to(tl.int64) * out_slots + out_offset + slot) * slab_elems
        else:
            source = pair.to(tl.int64) * slab_elems
            target = slab * slab_elems
        values = tl.load(src_ptr + source + offs, mask=inside)
        tl.store(out_ptr + target + offs, values, mask=inside)


def gather_slabs(source: torch.Tensor, index: torch.Tensor, out: torch.Tensor, first_slot: int = 0) -> None:
    """out[r, first_slot + j] = source[index[r, j]]: source (slabs, ...) and out (B, slots, ...)
    contiguous with the same slab shape; index (B, N) int64 on source's device. Any element type
    (float8 slabs are copied as their bytes)."""
    source, out = as_bits(source), as_bits(out)
    batch, slots = index.shape
    if slots == 0:
        return
    if not triton_gather_usable(source):
        for row in range(batch):  # one gather per sample, straight into its slots
            torch.index_select(source, 0, index[row], out=out[row, first_slot : first_slot + slots])
        return
    assert source.is_contiguous() and out.is_contiguous() and source.shape[1:] == out.shape[2:]
    slab_elems = source[0].numel()
    grid = (batch * slots, triton.cdiv(slab_elems, BLOCK))
    _copy_slabs_kernel[grid](source, index.contiguous(), out, slab_elems, slots, out.shape[1], first_slot,
                             BLOCK=BLOCK, GATHER=True)


def scatter_slabs(values: torch.Tensor, index: torch.Tensor, target: torch.Tensor) -> None:
    """target[index[r]] = values[r]: values (B, ...) with target's slab shape, index (B,) int64 on
    target's device (distinct ids)."""
    values, target = as_bits(values), as_bits(target)
    if not triton_gather_usable(target):
        target.index_copy_(0, index, values)
        return
    values = values.contiguous()
    assert target.is_contiguous() and values.shape[1:] == target.shape[1:]
    slab_elems = target[0].numel()
    grid = (values.shape[0], triton.cdiv(slab_elems, BLOCK))
    _copy_slabs_kernel[grid](values, index.contiguous(), target, slab_elems, 1, 1, 0, BLOCK=BLOCK, GATHER=False)
