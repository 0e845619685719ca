"""Predicted seconds per schedulable item, the currency of admission and scheduling.

Items: a batched ``denoise`` step, a ``cache`` pass, a ``decode`` (keyed by batch size and a
context bucket), and an ``offload`` / ``restore`` of one session's KV. Values come from a
start-up profile (:func:`sessiond.admission.calibrate.calibrate`): each bucket takes the lower
quartile of its samples (a neighbour on a shared machine only ever slows a sample, so the low
quartile of many is what repeats from start to start; the margin absorbs the rest). They are
corrected online from the engine's measured step times with an EWMA per bucket; a correction
fades back to the profile with `half_life_s` once its bucket stops being measured, and
`settle()` drops it. Contexts are filed under what the model attends: a chunk index past the
attention window (`context_chunks`, sink + window) costs what the full window costs, so a long
session never opens buckets of its own. The running relative error of each prediction against
the next measurement is kept, so the model states how far to trust it.

What a session costs beyond the engine's own seconds is measured online too: every scheduler
step's wall time, from the end of the step before (when the scheduler went straight on) to its
frames handed to their sessions, takes in the engine ops between steps (offload, restore,
rollbacks), the event loop, packing; `outside_s` is its EWMA over the engine's seconds. Its
overrun over the prediction made before the step, summed over consecutive steps until they make
a chunk's worth at batch 1 (`wall / predicted - 1` per such window: a deadline is about a chunk,
not a step), is kept for the last `_ERROR_WINDOW` windows, and the admission margin is a quantile
of it (`margin()`): with few samples the configured margin weighs in as a prior, and it never
goes below a floor.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from engine.api import ModelInfo, StepResult
from sessiond.admission.errors import CostModelError

__all__ = ["CHUNK_ITEMS", "ITEMS", "CostKey", "CostModel", "context_bucket"]

CHUNK_ITEMS = ("denoise", "cache", "decode")
ITEMS = (*CHUNK_ITEMS, "offload", "restore")
_MEMO_S = 0.25
_ERROR_WINDOW = 500  # the steps whose overrun the margin is taken from
MARGIN_QUANTILE = 0.95  # a director's stated risk is 5% of segments
MARGIN_PRIOR_SAMPLES = 50  # the configured margin counts as this many measured chunks
MARGIN_FLOOR = 0.05
MARGIN_CEILING = 0.75  # plan on at least a quarter of the engine (a step 4x its profile)
MARGIN_HOLD_S = 30.0  # the measured overruns count in full this long after the last one
MARGIN_HALF_LIFE_S = 60.0  # then their weight halves every this many seconds with no step measured


def context_bucket(chunks: int) -> int:
    """Context length in chunks, bucketed to 0, 1, 2, 4, 8, ... (the largest power of two <= it)."""
    return 0 if chunks <= 0 else 1 << (int(chunks).bit_length() - 1)


@dataclass(frozen=True)
class CostKey:
    item: str
    batch: int
    context: int  # a context_bucket()

    def label(self) -> str:
        return f"{self.item}/b{self.batch}/c{self.context}"


def _quantile(samples: list[float], q: float) -> float:
    """The q-quantile of `samples`, linear between order statistics (q=0.25: the lower quartile)."""
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class _Entry:
    samples: int
    calibration: list[float] = field(default_factory=list)  # profile samples; their lower quartile is the base
    online: float | None = None  # EWMA of online measurements (None: none since the last settle)
    online_at: float = 0.0  # when `online` last moved
    base: float | None = None  # the lower quartile of `calibration` (None: no profile sample)


class CostModel:
    """Seconds per item from calibration plus EWMA correction (``alpha`` weights the newest sample).
    ``context_chunks``: the chunks the model attends (sink + window); None files every context under
    its own bucket. ``half_life_s``: how fast an online correction fades once not measured."""

    def __init__(self, info: ModelInfo, *, alpha: float = 0.2, context_chunks: int | None = None,
                 half_life_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0.0 < alpha <= 1.0:
            raise CostModelError("invalid_sample", f"alpha must be in (0, 1], got {alpha}")
        if context_chunks is not None and context_chunks < 0:
            raise CostModelError("invalid_sample", f"context_chunks must be >= 0, got {context_chunks}")
        if half_life_s <= 0:
            raise CostModelError("invalid_sample", f"half_life_s must be > 0, got {half_life_s}")
        self.info = info
        self.alpha = alpha
        self.context_chunks = context_chunks
        self.half_life_s = half_life_s
        self._clock = clock
        self._table: dict[CostKey, _Entry] = {}
        self._index: dict[str, dict[int, dict[int, CostKey]]] = {}  # item -> context -> batch -> key
        self._memo: dict[tuple[int, int, bool], float] = {}  # (batch, context bucket, profile) -> predict_chunk
        self._memo_at = float("-inf")
        self.profile_clock = "wall"  # what the profile's samples measured: "wall" or "cpu" (thread CPU time)
        self._contention: list[float] = []  # profile steps' wall / CPU seconds (1: nothing else ran)
        self._error: dict[str, float] = {}  # item -> EWMA of |predicted - measured| / measured
        self._observed: dict[str, int] = {}
        self._overrun: deque[float] = deque(maxlen=_ERROR_WINDOW)  # chunks' worth of steps: wall / predicted - 1
        self._overrun_at = 0.0  # the clock when the last overrun was measured
        self._window = [0.0, 0.0]  # (predicted, wall) seconds of the steps not yet making a chunk's worth
        self._outside: float | None = None  # EWMA of a step's wall seconds beyond the engine's
        self._steps = 0
        self._overrun_q: tuple[float, float] | None = None  # (the overruns' quantile, its margin) until the next overrun
        self.profile_scale: dict[int, float] = {}  # batch -> the profile's buckets planned at base x this (1 if absent)

    @property
    def chunk_media_s(self) -> float:
        """Media seconds one chunk plays for."""
        return self.info.frames_per_chunk / self.info.fps

    @property
    def lead_in_s(self) -> float:
        """Media seconds a decoder stream's first chunk plays for fewer than the others
        (`ModelInfo.lead_in_frames`): a director segment that starts a stream needs that much more."""
        return self.info.lead_in_frames / self.info.fps

    def calibrated(self) -> bool:
        return all(self._has(item) for item in CHUNK_ITEMS)

    def record(self, item: str, batch: int, context_chunks: int, seconds: float) -> None:
        """A calibration sample: the bucket's base is the lower quartile of its calibration samples
        (robust to a noisy neighbour on a shared machine, which only ever slows a sample)."""
        key = self._key(item, batch, context_chunks, seconds)
        entry = self._table.get(key) or self._add(key, _Entry(0))
        self._memo.clear()
        entry.calibration.append(seconds)
        entry.samples += 1
        entry.base = _quantile(entry.calibration, 0.25)

    def note_contention(self, wall_over_cpu: float) -> None:
        """One profile step's wall seconds over its CPU seconds (the engine thread's)."""
        self._contention.append(wall_over_cpu)

    @property
    def contention(self) -> float | None:
        """The profile's median wall / CPU time: 1.0 when its thread had a core to itself, 2.0 when
        other load made it wait as long as it ran (None: not measured)."""
        return _quantile(self._contention, 0.5) if self._contention else None

    def set_profile_scale(self, scales: Mapping[int, float]) -> None:
        """Plan with every profiled bucket of batch b at `scales[b]` x its measured base (a batch not
        named: as measured). The start verdict (`sessiond.admission.start_verdict`) moves a start's
        profile to its machine's median and reads it at the edges of the start-to-start uncertainty
        this way; online corrections still move each bucket towards what is measured."""
        for batch, scale in scales.items():
            if not math.isfinite(scale) or not 0.5 <= scale <= 2.0:
                raise CostModelError("invalid_sample", f"profile scale must be in [0.5, 2], got {scale} at batch {batch}")
        self.profile_scale = {int(b): float(s) for b, s in scales.items()}
        self._memo.clear()

    def profiled_batches(self) -> list[int]:
        """The batch sizes the start-up profile measured at the steady context."""
        ctx = self.steady_context()
        return sorted(k.batch for k, e in self._table.items() if k.item == "denoise" and k.context == ctx and e.calibration)

    def settle(self) -> int:
        """Back to the start-up profile: every online correction is dropped, and buckets only the
        online measurements ever filled are forgotten; returns how many buckets changed. For an
        engine with nothing open: its steps were measured beside the sessions that ran and whatever
        else shared the machine (a browser decoding on the same cores raised the demo model's world
        cost from 0.74 to 0.87 engine s per media s on the 2-core box, over the 0.85 budget), and
        nothing idle would ever correct that, so the next lone session would be refused as if it
        could never fit."""
        self._memo.clear()
        moved = 0
        for key, entry in list(self._table.items()):
            if not entry.calibration:
                del self._table[key]
                del self._index[key.item][key.context][key.batch]
                if not self._index[key.item][key.context]:
                    del self._index[key.item][key.context]
                moved += 1
            elif entry.online is not None:
                moved += entry.online != entry.base
                entry.online = None
        return moved

    def seconds(self, key: CostKey) -> float:
        """The bucket's value now: its profile base, plus its online correction faded by age."""
        entry = self._table[key]
        base = None if entry.base is None else entry.base * self.profile_scale.get(key.batch, 1.0)
        if entry.online is None:
            assert base is not None  # an entry is created by record() or with an online value
            return base
        if base is None:
            return entry.online
        age = max(0.0, self._clock() - entry.online_at)
        return base + (entry.online - base) * 0.5 ** (age / self.half_life_s)

    def observe(self, item: str, batch: int, context_chunks: int, seconds: float) -> None:
        """An online measurement: tracks the prediction error, then moves the bucket by EWMA (from
        its current, possibly faded, value)."""
        key = self._key(item, batch, context_chunks, seconds)
        if self._has(item):
            predicted = self.predict(item, batch, context_chunks)
            rel = abs(predicted - seconds) / max(seconds, 1e-9)
            prev = self._error.get(item)
            self._error[item] = rel if prev is None else prev + self.alpha * (rel - prev)
        self._observed[item] = self._observed.get(item, 0) + 1
        entry = self._table.get(key)
        now = self._clock()
        if entry is None:
            self._add(key, _Entry(1, online=seconds, online_at=now))
        else:
            current = self.seconds(key)
            self._memo.clear()
            entry.samples += 1
            entry.online = current + self.alpha * (seconds - current)
            entry.online_at = now

    def observe_step(self, result: StepResult) -> None:
        """Feed one engine StepResult: its measured seconds per phase at its batch sizes; the context
        of a phase is the largest chunk index among that phase's items (chunks already in the KV)."""
        for phase, seconds in result.seconds.items():
            if phase not in CHUNK_ITEMS:
                continue
            batch = result.batch_sizes.get(phase, 0)
            indices = [r.chunk_index for r in result.results if r.phase.value == phase and r.error is None]
            if batch > 0 and indices and seconds > 0:
                self.observe(phase, batch, max(indices), seconds)

    def profile_seconds(self, key: CostKey) -> float:
        """The bucket's start-up profile value (its online value where the profile never filled it):
        what admission plans with once the model settles."""
        entry = self._table[key]
        return entry.base * self.profile_scale.get(key.batch, 1.0) if entry.base is not None else self.seconds(key)

    def predict(self, item: str, batch: int = 1, context_chunks: int = 0, *, profile: bool = False) -> float:
        """Seconds for one call of `item` at this batch and context. Unmeasured batches are
        interpolated linearly between measured ones (extrapolated from the last two); an
        unmeasured context bucket takes the nearest measured one."""
        if item not in ITEMS:
            raise CostModelError("invalid_sample", f"unknown item {item!r}; expected one of {list(ITEMS)}")
        if batch < 1:
            raise CostModelError("invalid_sample", f"batch must be >= 1, got {batch}")
        contexts = self._index.get(item)
        if not contexts:
            raise CostModelError("uncalibrated", f"no measurement of {item!r} yet: run calibrate() first")
        want = context_bucket(context_chunks)
        ctx = min(contexts, key=lambda c: (abs(math.log2(c + 1) - math.log2(want + 1)), -c))
        value = self.profile_seconds if profile else self.seconds
        points = sorted((b, value(k)) for b, k in contexts[ctx].items())
        return _interpolate(points, batch)

    def predict_chunk(self, batch: int = 1, context_chunks: int = 0, *, profile: bool = False) -> float:
        """GPU seconds to make one chunk for `batch` sessions together (all its phases). Remembered
        until the table changes or `_MEMO_S` passes (a correction fades far slower than that): one
        admission answer asks for the same few values thousands of times."""
        now = self._clock()
        if now - self._memo_at > _MEMO_S:
            self._memo.clear()
            self._memo_at = now
        key = (batch, context_bucket(context_chunks), profile)
        value = self._memo.get(key)
        if value is None:
            value = (self.info.denoise_steps * self.predict("denoise", batch, context_chunks, profile=profile)
                     + self.predict("cache", batch, context_chunks, profile=profile)
                     + self.predict("decode", batch, context_chunks, profile=profile))
            self._memo[key] = value
        return value

    def planned_step_s(self, batch: int, budget: float, *, profile: bool = True) -> float:
        """Wall seconds the scheduler's plan gives a step of `batch` chunks (`runtime.start_plan`, and the
        group test's world-lead check): the steady chunk stretched to the load budget, as the margin is
        measured (a quantile of the steps' wall time over the prediction), so 95% of chunks fit it."""
        return self.predict_chunk(batch, self.steady_context(), profile=profile) / budget

    def steady_context(self) -> int:
        """The context of a session in its steady state, which admission plans for: the full
        attention window when the model states it, else the largest context measured."""
        if self.context_chunks is not None:
            return context_bucket(self.context_chunks)
        return max(self._index.get("denoise", {}), default=0)

    def spread(self, batch: int = 1) -> tuple[float, float] | None:
        """The profile's uncertainty about the steady cost rate at `batch`: the cost rate from every
        profiled bucket's lower quartile and from its upper quartile (None: a chunk item of that
        steady bucket was not profiled at this batch)."""
        ctx = self.steady_context()
        rates = []
        for q in (0.25, 0.75):
            parts = {}
            for item in CHUNK_ITEMS:
                entry = self._table.get(CostKey(item, batch, ctx))
                if entry is None or not entry.calibration:
                    return None
                parts[item] = _quantile(entry.calibration, q)
            chunk = self.info.denoise_steps * parts["denoise"] + parts["cache"] + parts["decode"]
            rates.append(chunk / (batch * self.chunk_media_s))
        return rates[0], rates[1]

    def cost_rate(self, batch: int = 1, context_chunks: int | None = None, *, profile: bool = False) -> float:
        """GPU seconds per media second for one session when `batch` sessions are generated together
        (`profile`: by the start-up profile, as admission plans: its margin is measured against it)."""
        ctx = self.steady_context() if context_chunks is None else context_chunks
        return self.predict_chunk(batch, ctx, profile=profile) / (batch * self.chunk_media_s)

    def error(self, item: str) -> float | None:
        """Running relative error of predictions of `item` against measurements (None: none yet)."""
        return self._error.get(item)

    def predict_step(self, result: StepResult) -> float | None:
        """The seconds the start-up profile predicts for the engine calls of `result` (each phase at
        its batch and context): what admission plans with once the model settles, and the start
        plan always; None when a phase is not calibrated yet."""
        total = 0.0
        for phase, batch in result.batch_sizes.items():
            if phase not in CHUNK_ITEMS or batch <= 0 or not self._has(phase):
                continue
            indices = [r.chunk_index for r in result.results if r.phase.value == phase and r.error is None]
            total += self.predict(phase, batch, max(indices, default=0), profile=True)
        return total if total > 0 else None

    def note_step_wall(self, predicted_s: float, engine_s: float, wall_s: float) -> None:
        """One scheduler step measured whole: `predicted_s` (this model's, before the step corrected
        it), the engine's own seconds and the wall seconds the step took with everything around it."""
        if predicted_s <= 0 or wall_s <= 0 or not math.isfinite(wall_s):
            return
        self._steps += 1
        self._window[0] += predicted_s
        self._window[1] += wall_s
        # judged a chunk's worth at a time (what a deadline is about): one step's own jitter (a
        # neighbour's burst on a shared CPU, a collector pause) is not what a chunk sees
        chunk = self.predict_chunk(1, self.steady_context(), profile=True) if self.calibrated() else 0.0
        if self._window[0] >= chunk:
            self._overrun_q = None
            self._overrun.append(self._window[1] / self._window[0] - 1.0)
            self._overrun_at = self._clock()
            self._window = [0.0, 0.0]
        outside = max(0.0, wall_s - engine_s)
        self._outside = outside if self._outside is None else self._outside + self.alpha * (outside - self._outside)

    @property
    def outside_s(self) -> float | None:
        """EWMA of a step's wall seconds beyond the engine's own (None: no step measured)."""
        return self._outside

    def margin(self, prior: float, floor: float = MARGIN_FLOOR) -> tuple[float, str]:
        """(the admission margin, where it came from): the margin m at which planning on 1 - m of
        the engine covers the `MARGIN_QUANTILE` quantile q of the measured overruns (a chunk's
        worth of steps that took (1 + q) x its prediction: m = q / (1 + q)), blended with `prior`
        as if the prior were `MARGIN_PRIOR_SAMPLES` samples, at least `floor`, at most `MARGIN_CEILING`.
        With no step measured for over `MARGIN_HOLD_S` the overruns' weight halves every
        `MARGIN_HALF_LIFE_S`: nothing idle would ever measure that the machine is quick again, and
        a slow spell would otherwise refuse every later session, as if it could never fit."""
        n = len(self._overrun)
        if n == 0:
            return max(floor, prior), f"prior {prior:g} (no step measured yet)"
        if self._overrun_q is None:
            q = max(0.0, _quantile(list(self._overrun), MARGIN_QUANTILE))
            self._overrun_q = (q, q / (1.0 + q))
        q, measured = self._overrun_q
        idle = max(0.0, self._clock() - self._overrun_at - MARGIN_HOLD_S)
        fade = 0.5 ** (idle / MARGIN_HALF_LIFE_S)
        weight = self._measured_weight() * fade
        value = min(MARGIN_CEILING, max(floor, (1.0 - weight) * prior + weight * measured))
        faded = f" (faded x{fade:.2f}: no step measured for {idle + MARGIN_HOLD_S:.0f} s)" if idle > 0 else ""
        said = (f"p{MARGIN_QUANTILE * 100:g} of the last {n} chunks' worth of steps' overrun over the prediction "
                f"({q:+.1%}: margin {measured:.3f}), weighted {weight:.2f}{faded} against the prior {prior:g}, "
                f"floor {floor:g}")
        return value, said

    def _measured_weight(self) -> float:
        """The measured overruns' weight against the prior before any fading: n / (n + `MARGIN_PRIOR_SAMPLES`)."""
        n = len(self._overrun)
        return n / (n + MARGIN_PRIOR_SAMPLES)

    def seconds_until_margin(self, target: float, prior: float, floor: float = MARGIN_FLOOR) -> float | None:
        """Seconds until `margin(prior, floor)` is at most `target` with no step measured meanwhile
        (0: it is already); None when it never will (the prior or the floor are above `target`)."""
        if self.margin(prior, floor)[0] <= target + 1e-12:
            return 0.0
        if max(prior, floor) > target + 1e-12 or self._overrun_q is None:
            return None
        measured = self._overrun_q[1]
        # (1 - w f) prior + w f measured <= target, with measured > target >= prior
        fade = (target - prior) / (self._measured_weight() * (measured - prior))
        idle = MARGIN_HALF_LIFE_S * math.log2(1.0 / fade) if fade > 0 else math.inf
        return max(0.0, self._overrun_at + MARGIN_HOLD_S + idle - self._clock())

    def margin_snapshot(self, prior: float, floor: float = MARGIN_FLOOR) -> dict[str, object]:
        value, source = self.margin(prior, floor)
        over = list(self._overrun)
        return {"value": round(value, 4), "source": source, "prior": prior, "floor": floor,
                "quantile": MARGIN_QUANTILE, "samples": len(over), "steps_total": self._steps,
                "overrun_p50": round(_quantile(over, 0.5), 4) if over else None,
                "overrun_q": round(_quantile(over, MARGIN_QUANTILE), 4) if over else None,
                "outside_s": None if self._outside is None else round(self._outside, 5)}

    def snapshot(self, max_batch: int = 8) -> dict[str, object]:
        """JSON-able figures for /v1/capacity and metrics."""
        ready = self.calibrated()
        return {
            "model": self.info.name,
            "calibrated": ready,
            "chunk_media_s": self.chunk_media_s,
            "denoise_steps": self.info.denoise_steps,
            "alpha": self.alpha,
            "context_chunks": self.context_chunks,
            "profile_clock": self.profile_clock,
            "profile_contention": self.contention,
            "profile_scale": {str(b): round(s, 4) for b, s in sorted(self.profile_scale.items())},
            "steady_context": self.steady_context(),
            "half_life_s": self.half_life_s,
            "items": [{"item": k.item, "batch": k.batch, "context": k.context, "seconds": self.seconds(k),
                       "samples": e.samples} for k, e in sorted(self._table.items(), key=lambda kv: kv[0].label())],
            "profile_spread": {str(b): list(r) for b in range(1, max_batch + 1)
                               if (r := self.spread(b)) is not None},
            "cost_rate": {str(b): self.cost_rate(b) for b in range(1, max_batch + 1)} if ready else {},
            "chunk_seconds": {str(b): self.predict_chunk(b, self.steady_context())
                              for b in range(1, max_batch + 1)} if ready else {},
            "relative_error": dict(self._error),
            "observed": dict(self._observed),
            "outside_s": self._outside,
        }

    def _has(self, item: str) -> bool:
        return bool(self._index.get(item))

    def _add(self, key: CostKey, entry: _Entry) -> _Entry:
        self._memo.clear()
        self._table[key] = entry
        self._index.setdefault(key.item, {}).setdefault(key.context, {})[key.batch] = key
        return entry

    def _key(self, item: str, batch: int, context_chunks: int, seconds: float) -> CostKey:
        if item not in ITEMS:
            raise CostModelError("invalid_sample", f"unknown item {item!r}; expected one of {list(ITEMS)}")
        if batch < 1 or not math.isfinite(seconds) or seconds < 0:
            raise CostModelError("invalid_sample", f"{item}: batch must be >= 1 and seconds finite and >= 0, "
                                 f"got batch={batch} seconds={seconds}")
        if self.context_chunks is not None:
            context_chunks = min(context_chunks, self.context_chunks)  # the model attends no further back
        return CostKey(item, batch, context_bucket(context_chunks))


def _interpolate(points: list[tuple[int, float]], batch: int) -> float:
    """Piecewise-linear seconds(batch) through the measured points. Below the smallest measured batch:
    its value (conservative). Beyond the largest: extrapolated from the last two, never decreasing.
    With a single point: proportional to batch beyond it (no batching gain assumed)."""
    if len(points) == 1:
        b0, s0 = points[0]
        return s0 * batch / b0 if batch > b0 else s0
    for (b0, s0), (b1, s1) in itertools.pairwise(points):
        if batch <= b1:
            if batch <= b0:
                return s0
            return s0 + (s1 - s0) * (batch - b0) / (b1 - b0)
    (b0, s0), (b1, s1) = points[-2], points[-1]
    return max(s1, s1 + (s1 - s0) * (batch - b1) / (b1 - b0))
