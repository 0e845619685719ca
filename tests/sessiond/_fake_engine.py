"""A small fake engine for scheduler and engine-host tests (the real engine is exercised end to
end in tests/e2e)."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.api import ChunkFrames, FrameAction, ItemResult, Phase, StepPlan, StepResult

__all__ = ["FakeEngine"]

_PHASES = (Phase.DENOISE, Phase.DENOISE, Phase.DECODE, Phase.CACHE)


class FakeEngine:
    """Chunks of 8 frames in 4 phases; records every plan; `fail_begin` sessions raise."""

    def __init__(self, fail_begin: tuple[str, ...] = (), fail_step: tuple[str, ...] = ()) -> None:
        self.progress: dict[str, int | None] = {}
        self.chunks: dict[str, int] = {}
        self.plans: list[tuple[tuple[str, Phase], ...]] = []
        self.calls: list[tuple[str, str]] = []
        self.fail_begin = fail_begin
        self.fail_step = fail_step
        self.actions: dict[str, list[FrameAction]] = {}

    def begin_chunk(self, sid: str, actions: list[FrameAction]) -> int:
        if sid in self.fail_begin:
            raise RuntimeError("boom")
        self.progress[sid] = 0
        self.actions[sid] = actions
        self.chunks[sid] = self.chunks.get(sid, -1) + 1
        return self.chunks[sid]

    def next_phase(self, sid: str) -> Phase | None:
        p = self.progress.get(sid)
        return None if p is None else _PHASES[p]

    def step(self, plan: StepPlan) -> StepResult:
        if any(i.session_id in self.fail_step for i in plan.items):
            raise RuntimeError("batch boom")
        self.plans.append(tuple((i.session_id, i.phase) for i in plan.items))
        results = []
        for item in plan.items:
            p = self.progress[item.session_id]
            assert p is not None
            chunk = None
            if item.phase == Phase.DECODE:
                chunk = ChunkFrames(self.chunks[item.session_id], np.zeros((8, 4, 4, 3), np.uint8))
            self.progress[item.session_id] = None if p + 1 == len(_PHASES) else p + 1
            results.append(ItemResult(item.session_id, item.phase, self.chunks[item.session_id], chunk=chunk))
        return StepResult(tuple(results), seconds={"denoise": 0.001})

    def rollback(self, sid: str) -> int:
        self.calls.append(("rollback", sid))
        self.progress[sid] = None
        return 0

    def offload(self, sid: str) -> None:
        self.calls.append(("offload", sid))

    def restore(self, sid: str) -> bool:
        self.calls.append(("restore", sid))
        return sid != "s_full"

    def mark_delivered(self, sid: str, chunk_index: int) -> None:
        self.calls.append((f"delivered:{chunk_index}", sid))

    def kv_stats(self) -> Any:
        return None
