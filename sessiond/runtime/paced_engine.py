"""An engine that takes as long as a measured cost profile says (`sessiond serve --pace-profile FILE`).

For rehearsing admission and scheduling on a machine without the GPU they are meant for: a small
model (`tiny`) does the real work -- real sessions, KV cache, frames, PTS, transports -- and each
engine step then waits until the time the profile measured on the GPU for that step has passed, so
the daemon's own start-up calibration, its admission and its scheduler meet the GPU's costs while
everything else runs for real. The profile is the `calibration` of a `replay-compare` JSON (or that
object alone): seconds per engine item (denoise, cache, decode, offload, restore) by batch size and
context chunks. A step's target is the sum over its items' phases of the profiled seconds for that
phase at its batch size and the deepest context among them, scaled by the ratio of this model's media
per chunk to the profiled model's (offload and restore take the profiled seconds as they are: they
move a session's KV, whose size is the profiled model's). Where the model itself is slower than the profile, the step takes
its own time (the log says so once). `--pace-scale F` multiplies the profile's compute (denoise, cache,
decode; not offload or restore, which are transfers) by F: a GPU at a cost it does not reach yet, e.g.
an engine target (0.62 turns the H100's 0.403 GPU s per media s at one session into 0.25).
This is a load-rehearsal tool: nothing a user meets runs on it.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.api import FrameAction, StepPlan, StepResult

__all__ = ["PaceProfile", "PaceProfileError", "PacedEngine"]

logger = logging.getLogger(__name__)


_TRANSFERS = ("offload", "restore")  # moves of a session's KV: what compute costs does not change them


class PaceProfileError(ValueError):
    """A pace profile that cannot be read; the message says what to change."""


@dataclass(frozen=True)
class PaceProfile:
    seconds: dict[tuple[str, int, int], float]  # (item, batch, context chunks) -> seconds
    chunk_media_s: float  # media seconds of one chunk of the profiled model
    model: str
    source: str

    @classmethod
    def load(cls, path: str | Path) -> PaceProfile:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise PaceProfileError(f"--pace-profile {path}: cannot read it as JSON ({exc})") from exc
        return cls.from_json(data, str(path))

    @classmethod
    def from_json(cls, data: Any, source: str) -> PaceProfile:
        """`data`: a replay-compare JSON (its first daemon's `calibration`) or a calibration object."""
        calibration = data
        if isinstance(data, dict) and "daemons" in data:
            daemons = [d for d in data["daemons"].values() if isinstance(d, dict) and d.get("calibration")]
            if not daemons:
                raise PaceProfileError(f"--pace-profile {source}: no daemon in it has a calibration")
            calibration = daemons[0]["calibration"]
        if not isinstance(calibration, dict) or not calibration.get("items"):
            raise PaceProfileError(f"--pace-profile {source}: expected a calibration with `items` "
                                   "(the `calibration` of a replay-compare JSON)")
        try:
            seconds = {(str(i["item"]), int(i["batch"]), int(i["context"])): float(i["seconds"])
                       for i in calibration["items"]}
            chunk_media_s = float(calibration["chunk_media_s"])
        except (KeyError, TypeError, ValueError) as exc:
            raise PaceProfileError(f"--pace-profile {source}: an item lacks item/batch/context/seconds, "
                                   f"or chunk_media_s is missing ({exc!r})") from exc
        if chunk_media_s <= 0 or any(s < 0 for s in seconds.values()):
            raise PaceProfileError(f"--pace-profile {source}: chunk_media_s and every item's seconds must be positive")
        return cls(seconds, chunk_media_s, str(calibration.get("model", "?")), source)

    def scaled(self, factor: float) -> PaceProfile:
        """The profile with every compute item's seconds times `factor` (transfers as they are)."""
        if not factor > 0:
            raise PaceProfileError(f"--pace-scale must be a positive factor, got {factor}")
        if factor == 1.0:
            return self
        seconds = {key: s if key[0] in _TRANSFERS else s * factor for key, s in self.seconds.items()}
        return replace(self, seconds=seconds, source=f"{self.source} x{factor:g}")

    def step_seconds(self, item: str, batch: int, context: int) -> float | None:
        """Profiled seconds of `item` at `batch` and `context`: the deepest profiled context not above
        `context`, and the largest profiled batch not above `batch` scaled up in proportion (a batch
        beyond the profile costs at least as much per sample as the largest one measured). None
        when the profile has nothing for `item`."""
        rows = [(b, c, s) for (name, b, c), s in self.seconds.items() if name == item]
        if not rows:
            return None
        depth = max((c for _, c, _ in rows if c <= context), default=min(c for _, c, _ in rows))
        at_depth = [(b, s) for b, c, s in rows if c == depth]
        below = [(b, s) for b, s in at_depth if b <= batch]
        b0, s0 = max(below) if below else min(at_depth)
        return s0 * batch / b0


@dataclass
class PacedEngine:
    """`inner`, each step lasting at least what `profile` says (see the module's doc). Everything else
    is the inner engine's."""

    inner: Any
    profile: PaceProfile
    media_scale: float  # this model's media per chunk over the profiled model's
    clock: Callable[[], float] = time.perf_counter
    sleep: Callable[[float], None] = time.sleep
    _chunks: Counter[str] = field(default_factory=Counter)  # chunks begun per session
    _told_slower: bool = False

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def begin_chunk(self, session_id: str, actions: list[FrameAction]) -> Any:
        result = self.inner.begin_chunk(session_id, actions)
        self._chunks[session_id] += 1
        return result

    def close_session(self, session_id: str) -> Any:
        self._chunks.pop(session_id, None)
        return self.inner.close_session(session_id)

    def step(self, plan: StepPlan) -> StepResult:
        """The inner step, then a wait until the profiled time has passed; the result reports each
        phase's seconds as the profile's (or the model's own, where longer), as the engine's own
        timing is what the start-up profile and the scheduler's online measurements read."""
        began = self.clock()
        result = self.inner.step(plan)
        targets = self.targets_s(plan)
        self._wait(began, sum(targets.values()))
        seconds = {phase: max(own, targets.get(phase, 0.0)) for phase, own in result.seconds.items()}
        return replace(result, seconds=seconds)

    def offload(self, session_id: str) -> Any:
        began = self.clock()
        result = self.inner.offload(session_id)
        self._wait(began, self.profile.step_seconds("offload", 1, 0))
        return result

    def restore(self, session_id: str) -> Any:
        began = self.clock()
        result = self.inner.restore(session_id)
        self._wait(began, self.profile.step_seconds("restore", 1, 0))
        return result

    def targets_s(self, plan: StepPlan) -> dict[str, float]:
        """Per phase of the plan, what the profile says it takes on the profiled machine, scaled to this
        model's media."""
        phases: dict[str, list[int]] = {}
        for item in plan.items:
            context = max(0, self._chunks[item.session_id] - 1)  # chunks before the one in progress
            phases.setdefault(item.phase.value, []).append(context)
        return {phase: (self.profile.step_seconds(phase, len(contexts), max(contexts)) or 0.0) * self.media_scale
                for phase, contexts in phases.items()}

    def _wait(self, began: float, target: float | None) -> None:
        if not target:
            return
        left = target - (self.clock() - began)
        if left > 0:
            self.sleep(left)
        elif not self._told_slower:
            self._told_slower = True
            logger.warning("pace profile %s: a step took %.3f s, longer than the profile's %.3f s: this "
                           "machine runs the model slower than the profile, so it sets the pace there",
                           self.profile.source, self.clock() - began, target)
