"""`PictureMonitor`: does a session's picture still look like the world its model imitates?

A model may degrade during long play (the demo model can lose its avatar or collapse into a
periodic pattern). A model family that can tell (the demo model: `demo.picture`) gives the daemon
a check of one frame; the session samples one frame per second of media, the check runs off the
event loop, and this monitor turns the samples into a verdict with hysteresis: degraded when two of
the last three samples are bad, recovered after three good ones in a row. Each change of verdict
is one `picture` message to the viewer, so the page can say so instead of hiding it."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

__all__ = ["PictureMonitor", "PictureVerdict", "Sample"]


class Sample(Protocol):
    avatar: bool
    pattern: float
    bound: float
    doubled: bool  # a second avatar in the frame


@dataclass(frozen=True)
class PictureVerdict:
    ok: bool
    why: str | None  # what is wrong, in words, when not ok
    avatar: float  # share of the recent samples with the avatar visible
    pattern: float  # the largest recent pattern score
    bound: float


class PictureMonitor:
    def __init__(self, fps: int, window: int = 3, bad_to_degrade: int = 2, good_to_recover: int = 3) -> None:
        self.every = fps  # frames between samples: one per second of media
        self.window = window
        self.bad_to_degrade = bad_to_degrade
        self.good_to_recover = good_to_recover
        self._until_next = 0
        self._recent: deque[tuple[bool, Sample]] = deque(maxlen=window)
        self._good_run = 0
        self.degraded = False
        self.pending = False  # a sample is being checked
        self.episodes = 0  # times it went from ok to degraded

    def due(self, frames: int) -> bool:
        """`frames` more frames were generated: is one of them to be sampled now?"""
        self._until_next -= frames
        if self._until_next > 0 or self.pending:
            return False
        self._until_next = self.every
        self.pending = True
        return True

    def observe(self, sample: Sample) -> PictureVerdict | None:
        """One checked sample; the new verdict when it changed, else None."""
        self.pending = False
        bad = (not sample.avatar) or sample.doubled or sample.pattern > sample.bound
        self._recent.append((bad, sample))
        self._good_run = 0 if bad else self._good_run + 1
        was = self.degraded
        if not self.degraded and sum(b for b, _ in self._recent) >= self.bad_to_degrade:
            self.degraded = True
            self.episodes += 1
        elif self.degraded and self._good_run >= self.good_to_recover:
            self.degraded = False
        return self.verdict() if self.degraded != was else None

    def verdict(self) -> PictureVerdict:
        samples = [s for _, s in self._recent]
        avatar = sum(s.avatar for s in samples) / max(1, len(samples))
        pattern = max((s.pattern for s in samples), default=0.0)
        bound = samples[-1].bound if samples else 0.0
        why = None
        if self.degraded:  # what the recent bad samples showed
            bad = [s for b, s in self._recent if b]
            problems = []
            if any(not s.avatar for s in bad):
                problems.append("the avatar is gone from the centre")
            if any(s.doubled for s in bad):
                problems.append("a second avatar has appeared")
            if any(s.pattern > s.bound for s in bad):
                problems.append(f"the picture has collapsed into a repeating pattern (score {pattern:.0f}, "
                                f"the world's own at most {bound:.0f})")
            why = "; ".join(problems) or "the picture no longer looks like the world"
        return PictureVerdict(ok=not self.degraded, why=why, avatar=round(avatar, 3), pattern=round(pattern, 1),
                              bound=bound)
