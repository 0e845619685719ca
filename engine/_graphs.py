"""CUDA graphs over whole DiT passes, one per (batch, context slabs, cache write) bucket.

A DiT pass of wan-1.3b is ~1,000 kernel launches; replaying a captured graph removes the host's
launch gaps. A graph bakes in every address, so what changes between calls lives in static
buffers: the latents, timesteps and actions (~1 MB per sample, refilled every pass), the RoPE
cos/sin rows and the slab ids of the context (a gather by device index) and of the cache write (a
scatter), refilled only when they change (once per chunk), and the samples' prompt K/V, refilled
only when the batch holds other sessions (each session keeps one K/V tensor for its prompt). Slab
ids go up through pinned memory without a stream sync. Samples of a bucket all have the same
number of context slabs (the eager path batches mixed context lengths; those stay eager).

A bucket runs eagerly through the static path on its first call (any lazy initialisation happens
outside a capture) and is captured on its second, then replayed. `Capturer` makes the capture
replaceable: `cuda_capturer` on CUDA, `rerun_capturer` (replay = call again) for CPU tests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from engine.attention import AttentionBackend
from engine.kv import ChunkKVPool
from engine.kv.gather import gather_slabs, scatter_slabs
from engine.kv.pool import as_bits
from engine.model import AttnContext, CausalDiT
from engine.rope import RopeTable

__all__ = ["Capturer", "GraphKey", "PassGraphs", "cuda_capturer", "rerun_capturer"]

Replay = Callable[[], None]
Capturer = Callable[[Callable[[], torch.Tensor]], tuple[Replay, torch.Tensor]]


def cuda_capturer(device: torch.device) -> Capturer:
    """Capture into torch.cuda.CUDAGraph objects sharing one memory pool (passes never overlap,
    and each replay's output is copied out before the next)."""
    pool = torch.cuda.graph_pool_handle()
    graphs: list[torch.cuda.CUDAGraph] = []  # kept alive with the capturer

    def capture(fn: Callable[[], torch.Tensor]) -> tuple[Replay, torch.Tensor]:
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize(device)
        with torch.cuda.graph(graph, pool=pool):
            out = fn()
        graphs.append(graph)
        return graph.replay, out

    return capture


def rerun_capturer(fn: Callable[[], torch.Tensor]) -> tuple[Replay, torch.Tensor]:
    """A stand-in for graph capture: replay calls `fn` again and writes into the first output,
    so only what flows through the static buffers reaches the result (as with a real graph)."""
    out = fn()

    def replay() -> None:
        out.copy_(fn())

    return replay, out


@dataclass(frozen=True)
class GraphKey:
    batch: int
    context_slabs: int
    write: bool


Cross = tuple[torch.Tensor, torch.Tensor]


@dataclass
class _Statics:
    """The per-batch-size input buffers every graph of that batch size reads, and what the
    per-chunk ones hold (so they are refilled only when that changes)."""

    latents: torch.Tensor
    t: torch.Tensor
    actions: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    cross_k: torch.Tensor
    cross_v: torch.Tensor
    placeholder: torch.Tensor  # the prompt embeddings argument (unused: the K/V come cached)
    starts: list[int] = field(default_factory=list)  # frame starts the RoPE rows are for
    crosses: list[Cross] = field(default_factory=list)  # the samples' prompt K/V the buffers hold

    @classmethod
    def like(cls, latents: torch.Tensor, t: torch.Tensor, actions: torch.Tensor, cos: torch.Tensor,
             sin: torch.Tensor, crosses: list[Cross]) -> _Statics:
        k, v = crosses[0]
        batch = len(crosses)
        return cls(torch.empty_like(latents), torch.empty_like(t), torch.empty_like(actions), torch.empty_like(cos),
                   torch.empty_like(sin), k.new_empty(k.shape[0], batch * k.shape[1], *k.shape[2:]),
                   v.new_empty(v.shape[0], batch * v.shape[1], *v.shape[2:]), latents.new_empty(0))

    def fill(self, latents: torch.Tensor, t: torch.Tensor, actions: torch.Tensor) -> None:
        for static, value in ((self.latents, latents), (self.t, t), (self.actions, actions)):
            static.copy_(value, non_blocking=True)

    def fill_rope(self, rope: RopeTable, starts: list[int], frames: int) -> bool:
        """Refill the RoPE rows if the samples' frame starts changed; True if it did."""
        if starts == self.starts:
            return False
        cos, sin = rope.for_frames(starts, frames)
        self.cos.copy_(cos)
        self.sin.copy_(sin)
        self.starts = list(starts)
        return True

    def fill_cross(self, crosses: list[Cross]) -> bool:
        """Refill the prompt K/V if the batch holds other tensors than last time; True if it did."""
        if len(crosses) == len(self.crosses) and all(
            a[0] is b[0] and a[1] is b[1] for a, b in zip(crosses, self.crosses, strict=True)
        ):
            return False
        for static, which in ((self.cross_k, 0), (self.cross_v, 1)):
            # (layers, 1, text_len, heads, d) per sample -> (layers, B, ...) in place
            torch.cat([c[which] for c in crosses], dim=1, out=static)
        self.crosses = list(crosses)
        return True


def _upload(index: torch.Tensor, ids: list[int] | list[list[int]]) -> None:
    """index <- ids without a stream sync (pinned staging on CUDA; the host allocator keeps the
    staging buffer until the copy has run)."""
    host = torch.tensor(ids, dtype=torch.long).reshape(index.shape)
    if index.is_cuda:
        host = host.pin_memory()
    index.copy_(host, non_blocking=True)


@dataclass
class _Graph:
    read_index: torch.Tensor  # (B, N) slab ids of each sample's context
    write_index: torch.Tensor  # (B,) slab ids written by a cache pass
    read_ids: list[list[int]] = field(default_factory=list)  # what the index tensors hold
    write_ids: list[int] = field(default_factory=list)
    calls: int = 0
    replay: Replay | None = None
    output: torch.Tensor | None = None

    def fill(self, context_slabs: list[list[int]], write_slabs: list[int] | None) -> int:
        """Upload the slab ids that changed; returns how many index tensors it uploaded."""
        uploads = 0
        if context_slabs != self.read_ids:
            _upload(self.read_index, context_slabs)
            self.read_ids = [list(ids) for ids in context_slabs]
            uploads += 1
        if write_slabs is not None and write_slabs != self.write_ids:
            _upload(self.write_index, write_slabs)
            self.write_ids = list(write_slabs)
            uploads += 1
        return uploads


@dataclass
class PassGraphs:
    model: CausalDiT
    pool: ChunkKVPool
    attend: AttentionBackend
    rope: RopeTable
    capturer: Capturer
    captured: int = 0  # graphs captured so far
    # per-chunk inputs refilled so far: "rope" rows, prompt K/V ("cross"), slab-id "uploads"
    refills: Counter[str] = field(default_factory=Counter)
    _statics: dict[int, _Statics] = field(default_factory=dict)
    _graphs: dict[GraphKey, _Graph] = field(default_factory=dict)

    @staticmethod
    def eligible(context_slabs: list[list[int]], crosses: list[Cross | None]) -> list[Cross] | None:
        """The samples' prompt K/V when one graph can serve the pass (every sample has them cached
        and the same number of context slabs); None: the pass runs eagerly."""
        ready = [c for c in crosses if c is not None]
        if len(ready) < len(crosses) or len({len(slabs) for slabs in context_slabs}) != 1:
            return None
        return ready

    def run(
        self, latents: torch.Tensor, t: torch.Tensor, actions: torch.Tensor, starts: list[int], crosses: list[Cross],
        context_slabs: list[list[int]], write_slabs: list[int] | None,
    ) -> torch.Tensor:
        """The pass's flow (a fresh tensor), eagerly on the bucket's first call, by a captured
        graph after."""
        batch = latents.shape[0]
        key = GraphKey(batch, len(context_slabs[0]), write_slabs is not None)
        frames = latents.shape[2]
        statics = self._statics.get(batch)
        if statics is None:
            cos, sin = self.rope.for_frames(starts, frames)
            statics = self._statics[batch] = _Statics.like(latents, t, actions, cos, sin, crosses)
        statics.fill(latents, t, actions)
        self.refills["rope"] += statics.fill_rope(self.rope, starts, frames)
        self.refills["cross"] += statics.fill_cross(crosses)
        graph = self._graphs.get(key)
        if graph is None:
            device = latents.device
            graph = self._graphs[key] = _Graph(
                torch.zeros(batch, key.context_slabs, dtype=torch.long, device=device),
                torch.zeros(batch, dtype=torch.long, device=device),
            )
        self.refills["uploads"] += graph.fill(context_slabs, write_slabs)
        graph.calls += 1
        if graph.replay is None:
            if graph.calls == 1:
                return self._pass(key, statics, graph).clone()
            graph.replay, graph.output = self.capturer(lambda: self._pass(key, statics, graph))
            self.captured += 1
        graph.replay()
        assert graph.output is not None
        return graph.output.clone()

    def _pass(self, key: GraphKey, statics: _Statics, graph: _Graph) -> torch.Tensor:
        ctx = AttnContext(cos=statics.cos, sin=statics.sin, contexts=[[0] * key.context_slabs] * key.batch,
                          read=self._reader(graph.read_index), read_means=self._means_reader(graph.read_index))
        if key.write:
            ctx.write = self._writer(graph.write_index)
        return self.model(  # type: ignore[no-any-return]
            statics.latents, statics.t, statics.actions, statics.placeholder, ctx, self.attend,
            (statics.cross_k, statics.cross_v),
        )

    def _reader(self, index: torch.Tensor) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
        storage = self.pool.storage

        def read(layer: int, slabs: list[list[int]], k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            out = []
            for which, current in ((0, k), (1, v)):
                rows, tokens = current.shape[0], current.shape[1]
                both = current.new_empty(rows, index.shape[1] + 1, tokens, *current.shape[2:])
                as_bits(both[:, 0]).copy_(as_bits(current))
                gather_slabs(storage[layer, which], index, both, first_slot=1)
                out.append(both.view(rows, -1, *current.shape[2:]))
            return out[0], out[1]

        return read

    def _means_reader(self, index: torch.Tensor) -> Callable[..., torch.Tensor] | None:
        """With an e4m3 pool: per sample its current chunk's value mean then its slabs' (the slab
        ids from the device index, as `_reader`) -> (B * (N + 1), heads, d)."""
        means = self.pool.means
        if means is None:
            return None

        def read(layer: int, slabs: list[list[int]], centre: torch.Tensor) -> torch.Tensor:
            rows = centre.shape[0]
            both = centre.new_empty(rows, index.shape[1] + 1, *centre.shape[1:])
            both[:, 0].copy_(centre)
            both[:, 1:].copy_(means[layer][index])
            return both.view(-1, *centre.shape[1:])

        return read

    def _writer(self, index: torch.Tensor) -> Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor | None], None]:
        storage, means = self.pool.storage, self.pool.means

        def write(layer: int, k: torch.Tensor, v: torch.Tensor, centre: torch.Tensor | None) -> None:
            scatter_slabs(k, index, storage[layer, 0])
            scatter_slabs(v, index, storage[layer, 1])
            if means is not None and centre is not None:
                means[layer].index_copy_(0, index, centre.float())

        return write
