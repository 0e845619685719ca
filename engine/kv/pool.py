"""ChunkKVPool: fixed slabs of chunk K/V preallocated on one device under a byte budget.

One slab holds one chunk's K and V for every layer. Physically the pool is one tensor laid out
(layers, 2, slabs, tokens, heads, head_dim) so a layer's context is one gather. Its element type is
the model's compute dtype, or e4m3 with FP8 attention (half the bytes: engine.model.kv_fp8; its
bytes are copied as they are, through uint8 views where torch has no float8 kernel; each e4m3 slab
keeps, per layer, the mean its values were centred by, fp32 (heads, d), beside the bytes, and moves
with them). Slab ids are ints;
the free list is a stack (O(1) alloc/free, lowest ids first on a fresh pool). `alloc` returns None
when the pool cannot satisfy the request (pressure is the scheduler's decision, never an
exception). Accounting holds ints only; tensors live here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.api import KVStats
from engine.errors import SessionStateError

__all__ = ["ChunkKVPool", "HostSlabs", "SlabGeometry", "as_bits"]

_FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def as_bits(t: torch.Tensor) -> torch.Tensor:
    """A float8 tensor as uint8 (same bytes, no copy; torch lacks several float8 copy kernels),
    any other tensor as it is."""
    return t.view(torch.uint8) if t.dtype in _FLOAT8 else t


def _cat(parts: list[torch.Tensor]) -> torch.Tensor:
    """torch.cat along dim 0 for any element type (float8 as its bytes)."""
    return torch.cat([as_bits(p) for p in parts], dim=0).view(parts[0].dtype)


@dataclass(frozen=True)
class SlabGeometry:
    layers: int
    tokens: int  # tokens of one chunk
    heads: int
    head_dim: int
    dtype: torch.dtype

    @property
    def slab_bytes(self) -> int:
        itemsize = torch.empty(0, dtype=self.dtype).element_size()
        return self.layers * 2 * self.tokens * self.heads * self.head_dim * itemsize


@dataclass
class HostSlabs:
    """Slab contents copied off the device: (n, layers, 2, tokens, heads, head_dim), and for e4m3
    slabs their values' means (n, layers, heads, head_dim) fp32."""

    data: torch.Tensor
    means: torch.Tensor | None = None

    @property
    def count(self) -> int:
        return int(self.data.shape[0])


class ChunkKVPool:
    def __init__(self, geometry: SlabGeometry, budget_bytes: int, device: torch.device) -> None:
        self.geometry = geometry
        self.device = device
        self.slab_bytes = geometry.slab_bytes
        self.num_slabs = budget_bytes // self.slab_bytes
        g = geometry
        shape = (g.layers, 2, self.num_slabs, g.tokens, g.heads, g.head_dim)
        bits = torch.uint8 if g.dtype in _FLOAT8 else g.dtype  # zeros: 0x00 is +0.0 in float8 too
        self.storage = torch.zeros(shape, dtype=bits, device=device).view(g.dtype)
        # e4m3 values are stored centred by their chunk's mean (engine.model.kv_fp8): kept here
        self.means = (torch.zeros((g.layers, self.num_slabs, g.heads, g.head_dim), device=device)
                      if g.dtype in _FLOAT8 else None)
        self._free: list[int] = list(range(self.num_slabs - 1, -1, -1))  # pop() yields 0, 1, 2, ...
        self._owner: list[str | None] = [None] * self.num_slabs
        self._on_device: dict[str, int] = {}
        self._offloaded: dict[str, int] = {}

    # allocation ----------------------------------------------------------------------------
    @property
    def free_slabs(self) -> int:
        return len(self._free)

    def alloc(self, owner: str, count: int) -> list[int] | None:
        """`count` slab ids for `owner`, or None (nothing allocated) when fewer are free."""
        if count > len(self._free):
            return None
        ids = [self._free.pop() for _ in range(count)]
        for slab in ids:
            self._owner[slab] = owner
        self._on_device[owner] = self._on_device.get(owner, 0) + count
        return ids

    def free(self, ids: list[int]) -> None:
        for slab in ids:
            owner = self._owner[slab]
            if owner is None:
                raise SessionStateError("double_free", f"slab {slab} is already free")
            self._owner[slab] = None
            self._on_device[owner] -= 1
            if not self._on_device[owner]:
                del self._on_device[owner]
            self._free.append(slab)

    # host copies ---------------------------------------------------------------------------
    def copy_out(self, ids: list[int]) -> HostSlabs:
        """Copy slab contents to host memory (pinned when the pool is on CUDA)."""
        index = torch.tensor(ids, device=self.device, dtype=torch.long)
        data = as_bits(self.storage).index_select(2, index).movedim(2, 0)  # (n, layers, 2, tokens, heads, d)
        host = torch.empty(data.shape, dtype=data.dtype, pin_memory=self.device.type == "cuda")
        host.copy_(data)
        means = None if self.means is None else self.means.index_select(1, index).movedim(1, 0).cpu()
        return HostSlabs(host.view(self.storage.dtype), means)

    def copy_in(self, ids: list[int], host: HostSlabs) -> None:
        index = torch.tensor(ids, device=self.device, dtype=torch.long)
        data = as_bits(host.data).to(self.device, non_blocking=True).movedim(0, 2)
        as_bits(self.storage).index_copy_(2, index, data)
        if self.means is not None:
            if host.means is None:
                raise SessionStateError("kv_means_missing", "e4m3 slabs came back without their values' means")
            self.means.index_copy_(1, index, host.means.to(self.device).movedim(0, 1))

    def offload(self, owner: str, ids: list[int]) -> HostSlabs:
        """Move `ids` to host memory and free them; accounted as `owner`'s offloaded slabs."""
        host = self.copy_out(ids)
        self.free(ids)
        self._offloaded[owner] = self._offloaded.get(owner, 0) + host.count
        return host

    def restore(self, owner: str, host: HostSlabs) -> list[int] | None:
        """Bring offloaded slabs back into fresh slabs (same order), or None when the pool is full."""
        ids = self.alloc(owner, host.count)
        if ids is None:
            return None
        self.copy_in(ids, host)
        self.drop_offloaded(owner, host.count)
        return ids

    def drop_offloaded(self, owner: str, count: int) -> None:
        """Forget `count` of `owner`'s offloaded slabs (restored, or the session closed)."""
        left = self._offloaded.get(owner, 0) - count
        if left < 0:
            raise SessionStateError("offload_accounting", f"{owner!r} has fewer than {count} offloaded slabs")
        if left:
            self._offloaded[owner] = left
        else:
            self._offloaded.pop(owner, None)

    # attention I/O -------------------------------------------------------------------------
    def read(
        self, layer: int, slabs: list[list[int]], k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values for attention of G samples with the same number N of context slabs:
        sample i's current chunk k[i], v[i] (T, heads, d) followed by its `slabs[i]` of `layer`
        -> (G, (N+1)*T, heads, d) each. Slab ids are host ints, so this is one concatenation
        kernel over contiguous views per tensor (no gather, no host sync)."""
        keys, values, _ = self.read_packed(layer, slabs, k, v)
        return (keys.view(len(slabs), -1, *k.shape[2:]), values.view(len(slabs), -1, *v.shape[2:]))

    def read_packed(
        self, layer: int, slabs: list[list[int]], k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """The same for samples with any numbers of context slabs, concatenated along the sequence:
        (sum of key lengths, heads, d) each, and the key length of each sample, (N_i + 1) * T."""
        out = []
        for which, current in ((0, k), (1, v)):
            source = self.storage[layer, which]  # (slabs, T, heads, d)
            parts = [t for row, ids in enumerate(slabs) for t in (current[row], *(source[slab] for slab in ids))]
            out.append(_cat(parts))
        lengths = [k.shape[1] + len(ids) * self.geometry.tokens for ids in slabs]
        return out[0], out[1], lengths

    def read_means(self, layer: int, slabs: list[list[int]], current: torch.Tensor) -> torch.Tensor:
        """The means e4m3 values were centred by, in `read_packed`'s order: per sample its current
        chunk's (current[i], (heads, d)) then its slabs' -> (chunks, heads, d) fp32."""
        if self.means is None:
            raise SessionStateError("kv_means_missing", "only an e4m3 pool keeps its values' means")
        source = self.means[layer]
        return torch.stack([t for row, ids in enumerate(slabs) for t in (current[row], *(source[s] for s in ids))])

    def write(self, layer: int, slabs: list[int], k: torch.Tensor, v: torch.Tensor,
              centre: torch.Tensor | None = None) -> None:
        """In place: slab slabs[i] <- k[i], v[i] (tokens, heads, d) for `layer` (host ids: no sync);
        an e4m3 pool also keeps centre[i] (heads, d), the mean v[i] was centred by."""
        if (self.means is None) != (centre is None):
            raise SessionStateError("kv_means_missing", "an e4m3 pool's write needs the values' means, no other does")
        storage = as_bits(self.storage)
        for row, slab in enumerate(slabs):
            storage[layer, 0, slab].copy_(as_bits(k[row]))
            storage[layer, 1, slab].copy_(as_bits(v[row]))
            if self.means is not None and centre is not None:
                self.means[layer, slab].copy_(centre[row])

    # accounting ----------------------------------------------------------------------------
    def stats(self) -> KVStats:
        in_use = self.num_slabs - len(self._free)
        offloaded = sum(self._offloaded.values())
        owners = set(self._on_device) | set(self._offloaded)
        return KVStats(
            slab_bytes=self.slab_bytes,
            slabs_total=self.num_slabs,
            slabs_free=len(self._free),
            slabs_in_use=in_use,
            slabs_offloaded=offloaded,
            bytes_in_use=in_use * self.slab_bytes,
            bytes_offloaded=offloaded * self.slab_bytes,
            per_session={o: (self._on_device.get(o, 0), self._offloaded.get(o, 0)) for o in sorted(owners)},
        )
