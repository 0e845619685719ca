"""CUDA graphs over whole DiT passes, one per (batch, context slabs, cache write) bucket.

A DiT pass of wan-1.3b is ~1,000 kernel launches; replaying a captured graph removes the host's
launch gaps (the GPU sat idle ~8% of a denoise step on the H200). A graph bakes in every address,
so everything that changes between calls goes through static buffers that are filled before each
replay: the latents, timesteps, actions, the RoPE cos/sin rows, the samples' prompt K/V, and the
slab ids of the context (read by a gather with a device index) and of the cache write (an
`index_copy_`), instead of the eager path's host-int slab views. Samples of a bucket all have the
same number of context slabs (the eager path batches mixed context lengths; those stay eager).

A bucket runs eagerly through the static path on its first call (any lazy initialisation happens
outside a capture) and is captured on its second, then replayed. `Capturer` makes the capture
replaceable: `cuda_capturer` on CUDA, `rerun_capturer` (replay = call again) for CPU tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from engine.attention import AttentionBackend
from engine.kv import ChunkKVPool
from engine.model import AttnContext, CausalDiT

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


@dataclass
class _Statics:
    """The per-batch-size input buffers every graph of that batch size reads."""

    latents: torch.Tensor
    t: torch.Tensor
    actions: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    cross_k: torch.Tensor
    cross_v: torch.Tensor
    placeholder: torch.Tensor  # the prompt embeddings argument (unused: the K/V come cached)

    @classmethod
    def like(cls, latents: torch.Tensor, t: torch.Tensor, actions: torch.Tensor, cos: torch.Tensor,
             sin: torch.Tensor, cross: tuple[torch.Tensor, torch.Tensor]) -> _Statics:
        return cls(latents.clone(), t.clone(), actions.clone(), cos.clone(), sin.clone(), cross[0].clone(),
                   cross[1].clone(), latents.new_empty(0))

    def fill(self, latents: torch.Tensor, t: torch.Tensor, actions: torch.Tensor, cos: torch.Tensor,
             sin: torch.Tensor, cross: tuple[torch.Tensor, torch.Tensor]) -> None:
        for static, value in ((self.latents, latents), (self.t, t), (self.actions, actions), (self.cos, cos),
                              (self.sin, sin), (self.cross_k, cross[0]), (self.cross_v, cross[1])):
            static.copy_(value, non_blocking=True)


@dataclass
class _Graph:
    read_index: torch.Tensor  # (B, N) slab ids of each sample's context
    write_index: torch.Tensor  # (B,) slab ids written by a cache pass
    calls: int = 0
    replay: Replay | None = None
    output: torch.Tensor | None = None


@dataclass
class PassGraphs:
    model: CausalDiT
    pool: ChunkKVPool
    attend: AttentionBackend
    capturer: Capturer
    captured: int = 0
    _statics: dict[int, _Statics] = field(default_factory=dict)
    _graphs: dict[GraphKey, _Graph] = field(default_factory=dict)

    @staticmethod
    def eligible(context_slabs: list[list[int]], cross: tuple[torch.Tensor, torch.Tensor] | None) -> bool:
        """True when one graph can serve the pass: every sample has cached prompt K/V and the same
        number of context slabs."""
        return cross is not None and len({len(slabs) for slabs in context_slabs}) == 1

    def run(
        self, latents: torch.Tensor, t: torch.Tensor, actions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
        cross: tuple[torch.Tensor, torch.Tensor], context_slabs: list[list[int]], write_slabs: list[int] | None,
    ) -> torch.Tensor:
        """The pass's flow (a fresh tensor), eagerly on the bucket's first call, by a captured
        graph after."""
        batch = latents.shape[0]
        key = GraphKey(batch, len(context_slabs[0]), write_slabs is not None)
        statics = self._statics.get(batch)
        if statics is None:
            statics = self._statics[batch] = _Statics.like(latents, t, actions, cos, sin, cross)
        statics.fill(latents, t, actions, cos, sin, cross)
        graph = self._graphs.get(key)
        device = latents.device
        if graph is None:
            graph = self._graphs[key] = _Graph(
                torch.zeros(batch, key.context_slabs, dtype=torch.long, device=device),
                torch.zeros(batch, dtype=torch.long, device=device),
            )
        graph.read_index.copy_(torch.tensor(context_slabs, dtype=torch.long).reshape(batch, key.context_slabs))
        if write_slabs is not None:
            graph.write_index.copy_(torch.tensor(write_slabs, dtype=torch.long))
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
                          read=self._reader(graph.read_index))
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
                both[:, 0].copy_(current)
                for row in range(rows):  # one gather per sample, straight into its rows (no extra copy)
                    torch.index_select(storage[layer, which], 0, index[row], out=both[row, 1:])
                out.append(both.view(rows, -1, *current.shape[2:]))
            return out[0], out[1]

        return read

    def _writer(self, index: torch.Tensor) -> Callable[[int, torch.Tensor, torch.Tensor], None]:
        storage = self.pool.storage

        def write(layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
            storage[layer, 0].index_copy_(0, index, k)
            storage[layer, 1].index_copy_(0, index, v)

        return write
