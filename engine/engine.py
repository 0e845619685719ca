"""`Engine`: the causal chunked world model, stepped one phase at a time by the caller.

`step(plan)` is schedule -> execute -> update: items are checked against each session's state,
grouped by phase (decodes also by first/steady chunk), each group runs as ONE batched call, and
every item gets its own `ItemResult` (a bad session gets an error; the others are unaffected).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import defaultdict
from pathlib import Path

import torch

from engine._execute import PendingDecode, PhaseRunner, to_host
from engine._graphs import PassGraphs, cuda_capturer
from engine._setup import EngineParts, build_parts, parse_device
from engine._warmup import run_warmup
from engine.actions import encode_actions
from engine.api import FrameAction, ItemResult, KVStats, ModelInfo, Phase, StepPlan, StepResult
from engine.catalog import ModelCatalog, core_catalog
from engine.config import ModelConfig
from engine.errors import ConfigError, EngineError, SessionStateError
from engine.kv import KVHandle
from engine.placement import DecodeLane, DecoderPlacement, decoder_device
from engine.sampling import seeded_noise
from engine.session import ChunkRecord, ChunkWork, EngineSession
from engine.snapshot import Snapshot, decode_snapshot, encode_snapshot

__all__ = ["Engine"]

logger = logging.getLogger(__name__)


class Engine:
    """Implements engine.api.EngineProtocol. Build with `Engine.create(...)`."""

    def __init__(self, parts: EngineParts, placement: DecoderPlacement | None = None) -> None:
        self.parts = parts
        self.config = parts.config
        self.device = parts.device
        self.placement = placement or DecoderPlacement()
        self.lane = DecodeLane(self.placement, parts.decoder, parts.device, to_host)
        self.decode_device = self.lane.device
        self.runner = PhaseRunner(
            parts.config, parts.model, parts.decoder, parts.pool, parts.rope, parts.attend, parts.schedule,
            parts.device, lane=self.lane if self.lane.asynchronous else None,
        )
        if parts.config.cuda_graphs:
            self.runner.graphs = PassGraphs(parts.model, parts.pool, parts.attend, parts.rope,
                                            cuda_capturer(parts.device))
        self.pool = parts.pool
        self.info: ModelInfo = parts.info
        self._sessions: dict[str, EngineSession] = {}
        self.ready = False

    @classmethod
    def create(
        cls,
        model: str | ModelConfig = "tiny",
        device: str = "cpu",
        dtype: str | torch.dtype | None = None,
        weights: str | Path | None = None,
        kv_budget_bytes: int | None = None,
        attention: str = "auto",
        decoder_weights: str | Path | None = None,
        text_encoder_path: str | None = None,
        init_seed: int = 0,
        compile: str = "auto",
        cpu_threads: int | None = None,
        max_batch: int | None = None,
        catalog: ModelCatalog | None = None,
        decoder_placement: DecoderPlacement | None = None,
    ) -> Engine:
        """model: a config, or the name of one in `catalog` (None: `core_catalog()`, the core's own
        models; a model family outside the core needs a catalog it has added itself to).
        compile: "auto" (torch.compile the block kernels on CUDA only), "on" or "off".
        cpu_threads: set torch's intra-op threads (process-wide); on a shared 2-core box 1 thread
        measured 7x faster than 2 for the demo model. None leaves torch's setting alone.
        max_batch: the most sessions the caller will step at once (warm-up builds every batch size up
        to it, and the CUDA KV pool leaves room for its decode); None: the model config's.
        decoder_placement: where the decoder runs (engine.placement); None: in line, as always."""
        if cpu_threads is not None:
            if cpu_threads < 1:
                raise ConfigError("bad_cpu_threads", f"cpu_threads must be >= 1, got {cpu_threads}")
            torch.set_num_threads(cpu_threads)
        placement = decoder_placement or DecoderPlacement()
        engine_device = parse_device(device)
        return cls(
            build_parts(
                model, catalog or core_catalog(), device, dtype, weights, kv_budget_bytes, attention, decoder_weights, text_encoder_path,
                init_seed, compile, max_batch, decoder_device=decoder_device(placement, engine_device),
            ),
            placement,
        )

    # sessions ----------------------------------------------------------------------------------
    def _state(self, session_id: str) -> EngineSession:
        state = self._sessions.get(session_id)
        if state is None:
            raise SessionStateError("unknown_session", f"no session {session_id!r}; open it first")
        return state

    def session(self, session_id: str) -> EngineSession:
        """The session's state (read it; mutate it only through the engine)."""
        return self._state(session_id)

    def has_session(self, session_id: str) -> bool:
        return session_id in self._sessions

    def open_session(self, session_id: str, *, seed: int, prompt: str) -> bool:
        if session_id in self._sessions:
            raise SessionStateError("session_exists", f"session {session_id!r} is already open")
        c = self.config
        handle = KVHandle.open(self.pool, session_id, c.sink_chunks, c.window_chunks, c.max_rollback_chunks)
        if handle is None:
            return False
        self._sessions[session_id] = EngineSession(session_id, seed, prompt, handle)
        return True

    def close_session(self, session_id: str) -> None:
        state = self._sessions.pop(session_id, None)
        if state is not None:
            state.handle.release(self.pool)

    def set_prompt(self, session_id: str, prompt: str) -> None:
        self._state(session_id).prompt = prompt

    def _context(self, state: EngineSession) -> torch.Tensor:
        if state.context is None or state.context_prompt != state.prompt:
            state.context = self.embed_prompt(state.prompt)
            with torch.no_grad():  # computed once per prompt, not in every block of every pass
                state.cross = self.parts.model.cross_kv_all(state.context[None])
            state.context_prompt = state.prompt
        return state.context

    def embed_prompt(self, prompt: str) -> torch.Tensor:
        """The prompt's cross-attention context (text_len, dim), from the embedding cache."""
        with torch.no_grad():
            raw = self.parts.text_cache.get(prompt).to(self.device)
            return self.parts.model.embed_text(raw[None])[0]

    def begin_chunk(self, session_id: str, actions: list[FrameAction]) -> int:
        state = self._state(session_id)
        if state.work is not None:
            raise SessionStateError(
                "chunk_in_progress", f"session {session_id!r} chunk {state.work.index} is still in progress"
            )
        c = self.config
        encoded = encode_actions(c.action_space, actions, c.latent_frames_per_chunk, c.mouse_scale)
        index = state.next_chunk
        self._note_prompt_change(state, index)  # before a recontext gives the window's records the new prompt
        if c.recontext_on_prompt_change and self._prompt_changed(state):
            self.runner.rewrite_window(state, self._context(state))
        shape = (c.in_dim, c.latent_frames_per_chunk, c.latent_height, c.latent_width)
        state.work = ChunkWork(
            index=index,
            x=seeded_noise(shape, state.seed, index, 0, self.device),
            actions=encoded.to(self.device),
            context=self._context(state),
            prompt=state.prompt,
            steps=self.parts.schedule.steps,
            cross=state.cross,
        )
        old = self._guided_from(state, index)
        if old is not None:
            state.work.old_context = self.embed_prompt(old)
            with torch.no_grad():
                state.work.old_cross = self.parts.model.cross_kv_all(state.work.old_context[None])
        state.next_chunk = index + 1
        return index

    @staticmethod
    def _note_prompt_change(state: EngineSession, index: int) -> None:
        """Note a prompt change when its first chunk begins (the chunk before it, finished, was made
        under another prompt); forget it when a rollback returns to it with the old prompt set back."""
        last = state.records.get(index - 1)
        if last is not None and last.prompt != state.prompt:
            state.prompt_changed = (index, last.prompt)
        elif state.prompt_changed is not None and state.prompt_changed[0] >= index:
            state.prompt_changed = None

    def _guided_from(self, state: EngineSession, index: int) -> str | None:
        """With prompt_change_guidance: the prompt the session changed from, if chunk `index` is among
        the first `prompt_change_guidance_chunks` begun under its prompt; else None."""
        c = self.config
        if c.prompt_change_guidance == 1.0 or c.prompt_change_guidance_steps == 0 or state.prompt_changed is None:
            return None
        first, old = state.prompt_changed
        return old if index - first < c.prompt_change_guidance_chunks else None

    @staticmethod
    def _prompt_changed(state: EngineSession) -> bool:
        """Whether the last finished chunk was made under another prompt than the session's now."""
        last = state.records.get(state.handle.written - 1)
        return state.handle.on_device and last is not None and last.prompt != state.prompt

    def next_phase(self, session_id: str) -> Phase | None:
        return self._state(session_id).phase()

    # stepping ----------------------------------------------------------------------------------
    def step(self, plan: StepPlan) -> StepResult:
        results: dict[int, ItemResult] = {}
        groups: dict[str, list[tuple[int, EngineSession]]] = defaultdict(list)
        seen: set[str] = set()
        for pos, item in enumerate(plan.items):
            try:
                state = self._check_item(item.session_id, item.phase, seen)
            except EngineError as exc:
                results[pos] = ItemResult(item.session_id, item.phase, -1, error=str(exc))
                continue
            seen.add(item.session_id)
            groups[self._group_key(state, item.phase)].append((pos, state))
        seconds: dict[str, float] = {}
        sizes: dict[str, int] = {}
        # a decoder on its own stream or device: its groups start first and are collected last, so
        # they overlap the step's other groups (None: in line, each group in turn as always)
        pending: dict[str, tuple[PendingDecode, float]] = {}
        order = sorted(groups, key=lambda k: 0 if k.startswith("decode") else 1) if self.runner.lane else list(groups)
        for key in order:
            members = groups[key]
            states = [s for _, s in members]
            phase = Phase(key.split(":")[0])
            indices = [s.work.index for s in states]  # type: ignore[union-attr]
            start = time.perf_counter()
            try:
                if phase is Phase.DECODE and self.runner.lane is not None:
                    pending[key] = (self.runner.launch_decode(states), start)
                    continue
                chunks = self._run(phase, states)
            except (EngineError, RuntimeError, ValueError) as exc:
                self._group_failed(key, phase, members, indices, exc, results)
                continue
            self._sync()
            self._group_done(key, phase, members, indices, chunks, time.perf_counter() - start, results, seconds, sizes)
        # a placed decode that finishes its chunk runs the chunk's cache pass beside it (the pass
        # reads the clean latents, not the frames): one step less per chunk, and the decode overlaps
        # the pass the session's next chunk waits for
        failed: dict[str, Exception] = {}
        beside: dict[str, float] = {}  # seconds of the cache pass run while the group's decode ran
        for key, (decode, _) in pending.items():
            if decode.end < decode.works[0].x.shape[1]:
                continue  # the first part of a split first chunk: the rest is decoded in a later step
            start = time.perf_counter()
            try:
                self._run(Phase.CACHE, decode.states)
            except (EngineError, RuntimeError, ValueError) as exc:
                failed[key] = exc
                continue
            self._sync()
            beside[key] = time.perf_counter() - start
            seconds["cache"] = seconds.get("cache", 0.0) + beside[key]
            sizes["cache"] = sizes.get("cache", 0) + len(decode.states)
        for key, (decode, start) in pending.items():
            members = groups[key]
            indices = [w.index for w in decode.works]
            try:
                chunks = decode.finish()
                if key in failed:
                    raise failed[key]
            except (EngineError, RuntimeError, ValueError) as exc:
                self._group_failed(key, Phase.DECODE, members, indices, exc, results)
                continue
            # what the decode added to the step beyond the cache pass beside it: a chunk's phases'
            # seconds then add up to its wall time, as in line
            took = max(0.0, time.perf_counter() - start - beside.get(key, 0.0))
            self._group_done(key, Phase.DECODE, members, indices, chunks, took, results, seconds, sizes)
        ordered = tuple(results[pos] for pos in range(len(plan.items)))
        return StepResult(ordered, _merge_keys(seconds), _merge_keys(sizes))

    @staticmethod
    def _group_failed(key: str, phase: Phase, members: list[tuple[int, EngineSession]], indices: list[int],
                      exc: Exception, results: dict[int, ItemResult]) -> None:
        logger.exception("engine %s group of %d failed", key, len(members), exc_info=exc)
        for (pos, state), index in zip(members, indices, strict=True):
            results[pos] = ItemResult(state.session_id, phase, index, error=f"[{phase.value}_failed] {exc}")

    @staticmethod
    def _group_done(key: str, phase: Phase, members: list[tuple[int, EngineSession]], indices: list[int],
                    chunks: list, took_s: float, results: dict[int, ItemResult],  # type: ignore[type-arg]
                    seconds: dict[str, float], sizes: dict[str, int]) -> None:
        seconds[key] = seconds.get(key, 0.0) + took_s
        sizes[key] = sizes.get(key, 0) + len(members)
        for n, ((pos, state), index) in enumerate(zip(members, indices, strict=True)):
            chunk = chunks[n] if chunks else None
            results[pos] = ItemResult(state.session_id, phase, index, chunk=chunk)

    def _check_item(self, session_id: str, phase: Phase, seen: set[str]) -> EngineSession:
        state = self._state(session_id)
        if session_id in seen:
            raise SessionStateError("duplicate_item", f"session {session_id!r} appears twice in one plan")
        expected = state.phase()
        if expected is None:
            raise SessionStateError("no_chunk", f"session {session_id!r} has no chunk in progress; begin_chunk first")
        if expected is not phase:
            raise SessionStateError(
                "wrong_phase", f"session {session_id!r} needs {expected.value}, the plan asked {phase.value}"
            )
        if not state.handle.on_device:
            raise SessionStateError("offloaded", f"session {session_id!r} is offloaded; restore it first")
        return state

    def _group_key(self, state: EngineSession, phase: Phase) -> str:
        if phase is Phase.DECODE:  # one call per kind of decode: first or steady, same latent slice
            first = "first" if self.parts.decoder.is_first(state.decoder_cache) else "steady"
            start, end = self.runner.decode_slice(state)
            return f"decode:{first}:{start}:{end}"
        return phase.value

    def _run(self, phase: Phase, states: list[EngineSession]) -> list:  # type: ignore[type-arg]
        if phase is Phase.DENOISE:
            self.runner.denoise(states)
            return []
        if phase is Phase.CACHE:
            self.runner.cache(states)
            for state in states:
                state.trim(self.config.sink_chunks, self.config.window_chunks)
            return []
        return self.runner.decode(states)

    def _sync(self) -> None:
        if self.device.type != "cuda":
            return
        stream = torch.cuda.current_stream(self.device)
        if stream == torch.cuda.default_stream(self.device) and self.runner.lane is None:
            torch.cuda.synchronize(self.device)  # one engine, one stream: as always
        else:  # a replica's own stream, or a decoder stream whose work must go on meanwhile: this stream alone
            stream.synchronize()

    # delivery, rollback, reset ---------------------------------------------------------------
    def mark_delivered(self, session_id: str, chunk_index: int) -> None:
        state = self._state(session_id)
        work = state.work
        if work is not None and work.index == chunk_index and work.decoded_latents > 0 and not work.decoded:
            return  # the first part of a split first chunk: the chunk counts once all of it is out
        if chunk_index >= state.decoded:
            raise SessionStateError(
                "not_generated", f"chunk {chunk_index} of {session_id!r} is not decoded yet ({state.decoded} are)"
            )
        state.delivered = max(state.delivered, chunk_index)
        state.handle.mark_delivered(self.pool, state.delivered)
        state.trim(self.config.sink_chunks, self.config.window_chunks)

    def rollback(self, session_id: str) -> int:
        state = self._state(session_id)
        work = state.work
        kv_target = state.handle.rollback(self.pool)
        if work is not None and work.decoded and work.index <= state.delivered:
            return state.next_chunk  # the viewer saw this chunk: only its cache pass is left to run
        state.work = None
        target = min(kv_target, state.decoded)
        partial = work is not None and work.decoded_latents > 0 and work.index == target
        if target < state.decoded or partial:  # partial: the first part of a split first chunk went out
            state.decoder_cache = state.cache_before[target]
        state.decoded = target
        state.next_chunk = target
        state.records = {i: r for i, r in state.records.items() if i < target}
        state.cache_before = {i: c for i, c in state.cache_before.items() if i < target}
        return target

    def reset(self, session_id: str, *, seed: int, prompt: str) -> None:
        state = self._state(session_id)
        state.handle.release(self.pool)
        self._sessions.pop(session_id)
        if not self.open_session(session_id, seed=seed, prompt=prompt):
            raise SessionStateError("kv_full", f"session {session_id!r} could not get its KV back after reset")

    # residency ---------------------------------------------------------------------------------
    def offload(self, session_id: str) -> None:
        state = self._state(session_id)
        state.handle.offload(self.pool)
        self._move(state, torch.device("cpu"), torch.device("cpu"))

    def restore(self, session_id: str) -> bool:
        state = self._state(session_id)
        if not state.handle.restore(self.pool):
            return False
        self._move(state, self.device, self.decode_device)
        return True

    def _move(self, state: EngineSession, device: torch.device, decode_device: torch.device) -> None:
        decoder = self.parts.decoder
        if state.decoder_cache is not None:
            state.decoder_cache = decoder.cache_to(state.decoder_cache, decode_device)
        state.cache_before = {i: (None if c is None else decoder.cache_to(c, decode_device))
                              for i, c in state.cache_before.items()}
        for record in state.records.values():
            record.latents = record.latents.to(device)
            record.actions = record.actions.to(device)
        if state.context is not None:
            state.context = state.context.to(device)
        state.cross = None if state.cross is None else (state.cross[0].to(device), state.cross[1].to(device))
        work = state.work
        if work is not None:
            work.x, work.actions, work.context = work.x.to(device), work.actions.to(device), work.context.to(device)
            work.clean = None if work.clean is None else work.clean.to(device)
            work.cross = state.cross if work.prompt == state.context_prompt else None
            if work.old_context is not None and work.old_cross is not None:
                work.old_context = work.old_context.to(device)
                work.old_cross = (work.old_cross[0].to(device), work.old_cross[1].to(device))

    # snapshots ---------------------------------------------------------------------------------
    def snapshot(self, session_id: str) -> bytes:
        """Finished (cached) chunks' latents + conditioning (context and rollback margin) as safetensors."""
        state = self._state(session_id)
        written = state.handle.written
        records = [state.records[i] for i in sorted(state.records) if i < written]
        delivered = min(state.delivered, written - 1)
        return encode_snapshot(Snapshot(self.config.name, state.seed, written, delivered, records))

    def open_from_snapshot(self, session_id: str, data: bytes, *, seed: int, prompt: str) -> bool:
        snap = decode_snapshot(data)
        if snap.model != self.config.name:
            raise SessionStateError("snapshot_model", f"snapshot is for model {snap.model!r}, not {self.config.name!r}")
        if not self.open_session(session_id, seed=seed, prompt=prompt):
            return False
        state = self._state(session_id)
        try:
            self._load_records(state, snap)
        except (EngineError, RuntimeError, ValueError) as exc:
            self.close_session(session_id)
            raise SessionStateError("bad_snapshot", f"snapshot does not fit this model: {exc}") from exc
        return True

    def _load_records(self, state: EngineSession, snap: Snapshot) -> None:
        state.records = {r.index: r for r in snap.records}
        state.prompt_changed = _last_prompt_change(snap.records)
        self.recompute_kv(state.session_id)
        state.next_chunk = state.decoded = snap.next_chunk
        state.delivered = state.handle.delivered = min(snap.delivered, snap.next_chunk - 1)
        if snap.records:  # warm the decoder's temporal cache on the last finished chunk
            last = snap.records[-1].latents.to(self.decode_device)[None]
            _, caches = self.lane.run(lambda: self.parts.decoder.decode(last, [None]))
            state.decoder_cache = caches[0]

    def recompute_kv(self, session_id: str) -> None:
        """Rebuild the session's KV from its recorded clean latents (see PhaseRunner.recompute)."""
        state = self._state(session_id)
        records = [state.records[i] for i in sorted(state.records)]
        for record in records:
            record.latents, record.actions = record.latents.to(self.device), record.actions.to(self.device)
        embed = {r.prompt: self.embed_prompt(r.prompt) for r in records}
        self.runner.recompute(state, records, embed)
        state.handle.written = max((r.index + 1 for r in records), default=0)

    # accounting and warmup ---------------------------------------------------------------------
    def kv_stats(self) -> KVStats:
        return self.pool.stats()

    def warmup(self) -> None:
        run_warmup(self)
        attend = self.parts.attend  # "auto" may have chosen another backend by measurement
        self.info = dataclasses.replace(self.info, attention=attend.name, attention_timings_ms=tuple(
            (name, round(seconds * 1000.0, 4)) for name, seconds in sorted(attend.timings.items())))
        self.ready = True


def _merge_keys(values: dict[str, float] | dict[str, int]) -> dict:  # type: ignore[type-arg]
    """Report "decode:first"/"decode:steady" under "decode" as the API promises."""
    merged: dict[str, float] = {}
    for key, value in values.items():
        name = key.split(":")[0]
        merged[name] = merged.get(name, 0) + value
    return merged


def _last_prompt_change(records: list[ChunkRecord]) -> tuple[int, str] | None:
    """The last prompt change among consecutive finished chunks: (its first chunk, the prompt before)."""
    by_index = {r.index: r for r in records}
    for record in sorted(records, key=lambda r: r.index, reverse=True):
        before = by_index.get(record.index - 1)
        if before is not None and before.prompt != record.prompt:
            return record.index, before.prompt
    return None
