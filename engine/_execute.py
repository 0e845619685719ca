"""Running one phase for a batch of sessions: one batched forward (or decode) per call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from engine._batch import attn_context
from engine._graphs import PassGraphs
from engine.api import ChunkFrames
from engine.attention import AttentionBackend
from engine.config import ModelConfig
from engine.decoders import StreamingDecoder
from engine.kv import ChunkKVPool
from engine.model import CausalDiT
from engine.placement import DecodeJob, DecodeLane
from engine.rope import RopeTable
from engine.sampling import Schedule, seeded_noise
from engine.session import ChunkRecord, ChunkWork, EngineSession

__all__ = ["PendingDecode", "PhaseRunner", "to_host"]


@dataclass
class PhaseRunner:
    config: ModelConfig
    model: CausalDiT
    decoder: StreamingDecoder
    pool: ChunkKVPool
    rope: RopeTable
    attend: AttentionBackend
    schedule: Schedule
    device: torch.device
    graphs: PassGraphs | None = None  # CUDA graphs per (batch, context, write) bucket; None = eager
    lane: DecodeLane | None = None  # where the decoder runs (engine.placement); None = in line

    def _works(self, states: list[EngineSession]) -> list[ChunkWork]:
        works = [s.work for s in states]
        assert all(w is not None for w in works)
        return works  # type: ignore[return-value]

    @torch.no_grad()
    def forward(
        self,
        latents: torch.Tensor,  # (B, C, F, h, w)
        sigmas_t: list[float],  # model timestep per sample
        works: Sequence[ChunkWork | ChunkRecord],
        contexts: torch.Tensor,  # (B, text_len, dim)
        context_slabs: list[list[int]],
        write_slabs: list[int] | None,
    ) -> torch.Tensor:
        """One batched DiT pass; the blocks reuse each sample's cached prompt K/V when every sample
        has them (ChunkWork.cross), else project them from `contexts`."""
        out = self._pass(latents, sigmas_t, works, contexts, context_slabs, write_slabs, kv_only=False)
        assert out is not None
        return out

    @torch.no_grad()
    def write_kv(self, latents: torch.Tensor, works: Sequence[ChunkWork | ChunkRecord], contexts: torch.Tensor,
                 context_slabs: list[list[int]], write_slabs: list[int]) -> None:
        """A cache pass at t=0: only the K/V it writes are kept, so the eager path stops after the
        last block's write (its attention, cross-attention, FFN and the head are never used); a
        captured graph runs whole."""
        self._pass(latents, [0.0] * latents.shape[0], works, contexts, context_slabs, write_slabs, kv_only=True)

    def _pass(self, latents: torch.Tensor, sigmas_t: list[float], works: Sequence[ChunkWork | ChunkRecord],
              contexts: torch.Tensor, context_slabs: list[list[int]], write_slabs: list[int] | None,
              kv_only: bool) -> torch.Tensor | None:
        frames = self.config.latent_frames_per_chunk
        # per-sample timesteps filled on the device (no host-to-device copy in the per-pass path)
        t = torch.stack([torch.full((frames,), value, device=self.device) for value in sigmas_t])
        actions = torch.stack([w.actions.to(self.device) for w in works])
        starts = [w.index * frames for w in works]
        if self.graphs is not None:
            crosses = self.graphs.eligible(context_slabs, [w.cross if isinstance(w, ChunkWork) else None for w in works])
            if crosses is not None:
                return self.graphs.run(latents, t, actions, starts, crosses, context_slabs, write_slabs)
        cross = _batched_cross(works)
        ctx = attn_context(self.pool, self.rope, context_slabs, starts, frames, write_slabs)
        return self.model(latents, t, actions, contexts, ctx, self.attend, cross, kv_only)  # type: ignore[no-any-return]

    def denoise(self, states: list[EngineSession]) -> None:
        works = self._works(states)
        x = torch.stack([w.x for w in works])
        slabs = [s.handle.context_slabs(w.index) for s, w in zip(states, works, strict=True)]
        timesteps = [self.schedule.timestep(w.step) for w in works]
        contexts = torch.stack([w.context for w in works])
        writes = self._last_pass_writes(states, works)
        flow = self._flow(x, timesteps, works, contexts, slabs, writes)
        for i, (state, work) in enumerate(zip(states, works, strict=True)):
            clean = self.schedule.clean_estimate(x[i], flow[i], work.step)
            work.step += 1
            if work.step < work.steps:
                noise = seeded_noise(tuple(work.x.shape), state.seed, work.index, work.step, self.device)
                work.x = self.schedule.renoise(clean, noise, work.step)
            else:
                work.clean = clean
                work.kv_written = writes is not None

    def _last_pass_writes(self, states: list[EngineSession], works: list[ChunkWork]) -> list[int] | None:
        """With `kv_from_last_pass` (an approximation, off by default): the slabs the last denoise
        pass writes its K/V into, when every sample of the batch is on its last step and unguided;
        their chunks then skip the cache pass's forward. None: the cache pass writes them."""
        c = self.config
        if not c.kv_from_last_pass or any(w.step + 1 != w.steps for w in works):
            return None
        if any(self._acted(w) or self._prompted(w) for w in works):
            return None
        return [s.handle.slab_for_write(self.pool, w.index) for s, w in zip(states, works, strict=True)]

    def _acted(self, work: ChunkWork) -> bool:
        """Whether this step of the chunk is guided on the actions."""
        return self.config.action_guidance != 1.0 and work.step < self.config.action_guidance_steps

    def _prompted(self, work: ChunkWork) -> bool:
        """Whether this step of the chunk is guided away from the prompt its session changed from."""
        c = self.config
        return c.prompt_change_guidance != 1.0 and work.old_context is not None and \
            work.step < c.prompt_change_guidance_steps

    def _flow(self, x: torch.Tensor, timesteps: list[float], works: list[ChunkWork], contexts: torch.Tensor,
              slabs: list[list[int]], writes: list[int] | None = None) -> torch.Tensor:
        """The model's flow for a denoise step. Guided samples also run, in the same batched pass, with
        no input (guidance on the actions: flow(no input) + g * (flow(actions) - flow(no input))) and
        under the prompt their session changed from (prompt_change_guidance: + (g' - 1) * (flow(new) -
        flow(old))). Per sample: a session's result does not depend on what it is batched with."""
        c = self.config
        acted = [i for i, w in enumerate(works) if self._acted(w)]
        prompted = [i for i, w in enumerate(works) if self._prompted(w)]
        if not acted and not prompted:
            return self.forward(x, timesteps, works, contexts, slabs, writes)
        extra = [ChunkWork(works[i].index, works[i].x, torch.zeros_like(works[i].actions), works[i].context,
                           works[i].prompt, works[i].steps, cross=works[i].cross) for i in acted]
        extra += [ChunkWork(works[i].index, works[i].x, works[i].actions, works[i].old_context,  # type: ignore[arg-type]
                            works[i].prompt, works[i].steps, cross=works[i].old_cross) for i in prompted]
        rows = acted + prompted
        both = self.forward(
            torch.cat([x, torch.stack([x[i] for i in rows])]), timesteps + [timesteps[i] for i in rows],
            [*works, *extra], torch.cat([contexts, torch.stack([w.context for w in extra])]),
            slabs + [slabs[i] for i in rows], None,
        )
        n = len(works)
        still = dict(zip(acted, both[n:n + len(acted)], strict=True))
        old = dict(zip(prompted, both[n + len(acted):], strict=True))
        flows = []
        for i in range(n):
            flow = self._guide(both[i], still[i]) if i in still else both[i]
            if i in old:
                flow = flow + (c.prompt_change_guidance - 1.0) * (both[i] - old[i])
            flows.append(flow)
        return torch.stack(flows)

    def _guide(self, acted: torch.Tensor, still: torch.Tensor) -> torch.Tensor:
        """One sample's guided flow; with `action_guidance_rescale` r, its std is pulled (by r) toward
        the std of the plain flow with the actions, which keeps large scales from overshooting."""
        c = self.config
        flow = still + c.action_guidance * (acted - still)
        if c.action_guidance_rescale == 0.0:
            return flow
        matched = flow * (acted.float().std() / flow.float().std().clamp_min(1e-12)).to(flow.dtype)
        return c.action_guidance_rescale * matched + (1.0 - c.action_guidance_rescale) * flow

    def cache(self, states: list[EngineSession]) -> None:
        """The clean pass at t=0 that writes each chunk's K/V (context read before the write) and
        finishes the chunk; chunks whose last denoise pass wrote their K/V (`kv_from_last_pass`)
        only finish."""
        works = self._works(states)
        pending = [(s, w) for s, w in zip(states, works, strict=True) if not w.kv_written]
        if pending:
            slabs = [s.handle.context_slabs(w.index) for s, w in pending]
            writes = [s.handle.slab_for_write(self.pool, w.index) for s, w in pending]
            contexts = torch.stack([w.context for _, w in pending])
            inputs = [self._cache_input(s.seed, w.index, w.clean) for s, w in pending]  # type: ignore[arg-type]
            self.write_kv(torch.stack(inputs), [w for _, w in pending], contexts, slabs, writes)
        for state, work in zip(states, works, strict=True):
            state.handle.mark_written(self.pool, work.index)
            assert work.clean is not None
            state.records[work.index] = ChunkRecord(work.index, work.clean, work.actions, work.prompt)
            state.work = None  # the chunk is finished

    def _cache_input(self, seed: int, chunk: int, clean: torch.Tensor) -> torch.Tensor:
        """What the cache pass sees of a chunk: its clean latents plus `cache_context_noise` times
        noise seeded by (session seed, chunk), so recomputing the KV from records is exact."""
        std = self.config.cache_context_noise
        if std == 0.0:
            return clean
        step = self.schedule.steps  # a step index no denoise step uses
        return clean + std * seeded_noise(tuple(clean.shape), seed, chunk, step, self.device)

    def decode_slice(self, state: EngineSession) -> tuple[int, int]:
        """Latent frames [start, end) of the chunk in progress that the next decode covers."""
        work = state.work
        assert work is not None
        start, total = work.decoded_latents, work.x.shape[1]
        split = self.config.first_decode_split
        if start == 0 and 0 < split < total and self.decoder.is_first(state.decoder_cache):
            return 0, split
        return start, total

    def decode(self, states: list[EngineSession]) -> list[ChunkFrames]:
        """One decode call for sessions whose next slices have the same bounds (see decode_slice)."""
        return self.launch_decode(states).finish()

    def launch_decode(self, states: list[EngineSession]) -> PendingDecode:
        """Start the decode where the placement puts it (`lane`; None: in line); `finish()` waits for
        it and does the sessions' bookkeeping on the calling (engine) thread."""
        works = self._works(states)
        start, end = self.decode_slice(states[0])
        latents = torch.stack([w.clean[:, start:end] for w in works])  # type: ignore[index]
        caches = [s.decoder_cache for s in states]
        if self.lane is None:
            frames, new_caches = self.decoder.decode(latents, caches)
            job = DecodeJob(_done=(to_host(frames), new_caches))
        else:
            job = self.lane.launch(latents, caches)
        return PendingDecode(list(states), works, start, end, job)

    def rewrite_window(self, state: EngineSession, context: torch.Tensor) -> None:
        """Rewrite the K/V of the window's finished chunks under the prompt embedding ``context`` (the
        session's new prompt), oldest first, each reading the sink and the window's chunks before it
        (those before the window are evicted: the oldest reads one chunk less than when it was
        made). Their records take the new prompt, so a snapshot restores the same reading."""
        handle = state.handle
        window = [j for j in range(max(handle.sink_chunks, handle.written - handle.window_chunks), handle.written)
                  if j in state.records]
        for k, index in enumerate(window):
            record = state.records[index]
            slabs = [handle.slab_of(j) for j in range(handle.sink_chunks)] + [handle.slab_of(j) for j in window[:k]]
            latents = self._cache_input(state.seed, index, record.latents.to(self.device))[None]
            self.write_kv(latents, [record], context[None], [slabs], [handle.slab_of(index)])
            state.records[index] = ChunkRecord(index, record.latents, record.actions, state.prompt)

    def recompute(self, state: EngineSession, records: list[ChunkRecord], embed: dict[str, torch.Tensor]) -> None:
        """Rebuild a session's KV from clean latents, chunk by chunk in order (exact while every
        chunk's own context is among `records`; an approximation once the window has wrapped)."""
        available = {r.index for r in records}
        handle = state.handle
        for record in records:
            context = [
                handle.slab_of(j) for j in range(record.index)
                if j in available and (j < handle.sink_chunks or j >= record.index - handle.window_chunks)
            ]
            handle.written = record.index
            write = handle.slab_of(record.index)
            latents = self._cache_input(state.seed, record.index, record.latents.to(self.device))[None]
            ctx_emb = embed[record.prompt][None]
            self.write_kv(latents, [record], ctx_emb, [context], [write])
            handle.written = record.index + 1


@dataclass
class PendingDecode:
    """A launched decode of sessions' slices [start, end) of their chunks in progress."""

    states: list[EngineSession]
    works: list[ChunkWork]
    start: int
    end: int
    job: DecodeJob

    def finish(self) -> list[ChunkFrames]:
        host, caches = self.job.result()
        chunks = []
        for i, (state, work) in enumerate(zip(self.states, self.works, strict=True)):
            if self.start == 0:
                state.cache_before[work.index] = state.decoder_cache
            state.decoder_cache = caches[i]
            work.decoded_latents = self.end
            if work.decoded:
                state.decoded = work.index + 1
            chunks.append(ChunkFrames(work.index, np.ascontiguousarray(host[i])))
        return chunks


def to_host(frames: torch.Tensor) -> np.ndarray:
    """Decoded frames as a host array. From CUDA through pinned memory (the arrays keep it alive):
    the copy to pageable memory took ~5.4 ms of each 12-frame 480x832 chunk on the H200."""
    if frames.device.type != "cuda":
        return frames.numpy()
    host = torch.empty(frames.shape, dtype=frames.dtype, pin_memory=True)
    host.copy_(frames, non_blocking=True)
    torch.cuda.current_stream(frames.device).synchronize()
    return host.numpy()


def _batched_cross(works: Sequence[ChunkWork | ChunkRecord]) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The samples' cached cross-attention K and V, each concatenated on the batch dim, or None if
    a sample has none."""
    cross = [w.cross if isinstance(w, ChunkWork) else None for w in works]
    if any(c is None for c in cross):
        return None
    if len(cross) == 1:
        return cross[0]
    return torch.cat([c[0] for c in cross], dim=1), torch.cat([c[1] for c in cross], dim=1)  # type: ignore[index]
