"""The host allocator setting a CPU engine runs with: freed memory stays in the process.

A chunk on the CPU allocates and frees the same few-megabyte tensors hundreds of times (the
attention scores of a guided pass are 3 MB, a decoder activation 2-4 MB). glibc's malloc serves
blocks above its mmap threshold (128 KiB, raised on the fly up to at most 32 MiB) with a fresh
mmap and gives them back on free, and trims the top of its heap; every reuse then page-faults
the block in again, zero-filled, a page at a time. Measured on the 2-core box (a virtual
machine, where a page fault is dearer still), the demo model as served (bf16, 1 thread), 34
chunks per process, three alternating rounds: 467-534 thousand page faults and 217-230 ms per
chunk (17.4-18.5 frames/s) without; with the thresholds below 92-93 thousand faults and
163-191 ms (21.0-24.5 frames/s). Rows: results/demo/cpu_trades/host_memory_ab.json.

``keep_freed_host_memory`` raises both thresholds, so blocks up to ``HOLD_BYTES`` come from the
heap and freed memory stays there for the next chunk: the process keeps its peak working set
instead of returning it. Blocks above ``HOLD_BYTES`` (weights being loaded) are still mapped and
unmapped. glibc only (elsewhere it does nothing), process-wide, and left alone where the
operator already tuned malloc (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_`` or
``GLIBC_TUNABLES``) or opted out with ``ENGINE_KEEP_FREED_HOST_MEMORY=0``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["HOLD_BYTES", "OPT_OUT_ENV", "keep_freed_host_memory"]

HOLD_BYTES = 256 << 20  # blocks up to this size are served from (and freed back to) the heap
OPT_OUT_ENV = "ENGINE_KEEP_FREED_HOST_MEMORY"
_M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_OPERATOR_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def keep_freed_host_memory(hold_bytes: int = HOLD_BYTES) -> str:
    """Apply the setting to this process; returns what happened, in words (for the engine's log):
    "applied", or why not."""
    if os.environ.get(OPT_OUT_ENV, "1") == "0":
        return f"not applied: {OPT_OUT_ENV}=0"
    tuned = [name for name in _OPERATOR_SETTINGS if name in os.environ]
    if tuned:
        return f"not applied: the operator set {', '.join(tuned)}"
    if not sys.platform.startswith("linux"):
        return f"not applied: {sys.platform} is not Linux with glibc"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 -- present in glibc only (musl has no mallopt thresholds)
    except (OSError, AttributeError):
        return "not applied: the C library is not glibc"
    value = ctypes.c_int(min(hold_bytes, 2**31 - 1))
    if libc.mallopt(_M_MMAP_THRESHOLD, value) != 1 or libc.mallopt(_M_TRIM_THRESHOLD, value) != 1:
        return f"not applied: glibc refused the thresholds ({hold_bytes} bytes)"
    return "applied"
