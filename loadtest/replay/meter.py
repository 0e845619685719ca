"""What one user saw: the measurements of one replayed session (pure; times are given).

ttff: world `create` sent -> first frame; director `direct` sent -> first frame of its segment.
segment: `direct` sent -> last frame of its segment (segments that end `done`).
action-to-photon: action sent -> first frame whose `action_seq` >= its seq.
interrupt: `interrupt` sent -> its `ack`.
deadline miss: a frame arriving after its playback deadline. The player starts (anchors) at a
frame's arrival and plays at 1x on the pts timeline; a frame is due at anchor + its pts offset +
the playout allowance. It re-anchors on connect, resume, a new segment, a `disc` frame, and after
a miss (a stall rebuffers; later frames are not all counted late for it).
stale: after the `ack` of an interrupt or flush with pts P, a frame with pts > P that arrives before
the new generation's first frame (`disc: true`), or a frame of the interrupted segment after P.
start delay (director): `direct` sent -> the moment its segment's playback starts: when the
server's `segment_start.start_after_ms` advice says (counted from the arrival of `segment_start`),
or at its first frame's arrival when that is later or there is no advice.
stall: a frame not there at its playback time, as a player sees it; the player waits for it and
goes on from there (counted once per gap, its seconds summed). Director: from the segment's
playback start, frame n of the segment is due at start + its pts offset. World: a deadline miss
above is a stall (the player rebuffers).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from loadtest.replay.percentiles import percentile
from protocols.timeline import pts_for, pts_seconds
from sessiond.admission.decision import Objectives

__all__ = ["SessionMeter", "SessionResult"]


@dataclass
class SessionResult:
    key: str
    mode: str
    status: str = "pending"  # admitted | rejected | failed | pending
    session_id: str | None = None  # the daemon's id, once created
    reason: str | None = None
    retry_after_s: float | None = None
    frames_received: int = 0
    frames_expected: int = 0
    deadline_misses: int = 0
    stale_frames_after_ack: int = 0
    pts_errors: int = 0
    ttff_ms: list[float] = field(default_factory=list)
    segment_ms: list[float] = field(default_factory=list)
    action_to_photon_ms: list[float] = field(default_factory=list)
    interrupt_ms: list[float] = field(default_factory=list)
    segments_done: int = 0
    segments_interrupted: int = 0
    segments_late: int = 0  # took longer than their own media time (a figure, no longer an objective)
    segments_judged: int = 0  # director segments asked for and judged (started playing, or never answered)
    segments_missed: int = 0  # ... of which missed the objective: start delay over its bound, a stall, no answer
    start_delay_ms: list[float] = field(default_factory=list)
    stalls: int = 0
    stall_s: float = 0.0
    # each stall: when (seconds from the replay start, to line up with the daemon's log), how late,
    # in which segment (None for a world session) and at which of its frames
    stall_events: list[dict[str, Any]] = field(default_factory=list)
    # each director segment that started playing: when its `direct` went (seconds from the replay
    # start), which segment, and its start delay (to line a late start up with the daemon's log)
    start_events: list[dict[str, Any]] = field(default_factory=list)
    directs_unanswered: int = 0
    actions_unresolved: int = 0
    events_sent: int = 0
    events_skipped: int = 0
    admitted_at_s: float | None = None  # seconds from the replay start
    ended_at_s: float | None = None
    frame_times_s: list[float] = field(default_factory=list)  # arrival times (for load plots)
    players: list[Any] = field(default_factory=list)  # co-play: a PlayerMeter per seat, the owner's first

    def within_objective(self, objectives: Objectives) -> bool | None:
        """None unless admitted. World: deadline-miss rate (a share of its frames) and
        action-to-photon p95 within their bounds. Director: no stall once a segment started, every
        direct answered, and no more segments starting later than the start-delay bound than the
        stated risk explains (`late_beyond_risk`: a share of segments, as admission states it,
        judged over the segments the session had; over five segments a p95 is their maximum)."""
        if self.status != "admitted":
            return None
        if self.mode == "world":
            if self.frames_received == 0:
                return self.frames_expected == 0
            a2p = percentile(self.action_to_photon_ms, 95)
            return (self.deadline_misses / self.frames_received <= objectives.world_deadline_miss
                    and (a2p is None or a2p <= objectives.world_action_to_photon_p95_ms))
        bound_ms = objectives.director_start_delay_p95_s * 1000.0
        late = sum(1 for d in self.start_delay_ms if d > bound_ms)
        delay_ok = not late_beyond_risk(len(self.start_delay_ms), late, objectives.director_tail)
        return delay_ok and self.stalls == 0 and self.directs_unanswered == 0

    def to_json(self, objectives: Objectives) -> dict[str, Any]:
        from loadtest.replay.percentiles import summarize

        return {
            "key": self.key, "session_id": self.session_id, "mode": self.mode, "status": self.status,
            "reason": self.reason,
            "retry_after_s": self.retry_after_s, "within_objective": self.within_objective(objectives),
            "frames": {"received": self.frames_received, "expected": self.frames_expected,
                       "deadline_misses": self.deadline_misses,
                       "miss_rate": self.deadline_misses / self.frames_received if self.frames_received else None},
            "ttff_ms": summarize(self.ttff_ms), "segment_ms": summarize(self.segment_ms),
            "start_delay_ms": summarize(self.start_delay_ms),
            "stalls": {"count": self.stalls, "seconds": round(self.stall_s, 3)},
            "stall_events": self.stall_events, "start_events": self.start_events,
            "action_to_photon_ms": summarize(self.action_to_photon_ms),
            "interrupt_ms": summarize(self.interrupt_ms, ("p50", "p95")),
            "stale_frames_after_ack": self.stale_frames_after_ack, "pts_errors": self.pts_errors,
            "segments": {"done": self.segments_done, "interrupted": self.segments_interrupted,
                         "late": self.segments_late, "unanswered": self.directs_unanswered,
                         "judged": self.segments_judged, "missed": self.segments_missed},
            "actions_unresolved": self.actions_unresolved,
            "events": {"sent": self.events_sent, "skipped": self.events_skipped},
            "admitted_at_s": self.admitted_at_s, "ended_at_s": self.ended_at_s,
        } | ({"players": [p.to_json() for p in self.players]} if self.players else {})


def late_beyond_risk(judged: int, late: int, risk: float) -> bool:
    """Whether `late` of `judged` segments starting later than the bound is more than a stated risk
    of `risk` per segment explains: the chance of at least that many, each late with probability
    `risk`, is at most `risk` itself (one late segment of 1 is, of 5 is not: 0.23; 2 of 5 is: 0.023)."""
    if late <= 0 or judged <= 0:
        return False
    tail = sum(math.comb(judged, i) * risk**i * (1.0 - risk) ** (judged - i) for i in range(late, judged + 1))
    return tail <= risk + 1e-12


@dataclass
class _Direct:
    sent: float
    seconds: float
    segment: int | None = None
    first: float | None = None
    last: float | None = None
    frames: int = 0
    status: str | None = None
    play_at: float | None = None  # when the player may start the segment (the server's advice)
    start_pts: int | None = None
    playing: tuple[float, int] | None = None  # (when, pts) the player's timeline is anchored at
    start_delay_ms: float | None = None
    stalled: bool = False


class SessionMeter:
    """Feed it what was sent and what arrived, in order; read ``result``."""

    def __init__(self, key: str, mode: str, objectives: Objectives, *, default_segment_s: float = 5.0,
                 origin: float = 0.0) -> None:
        self.result = SessionResult(key, mode)
        self.objectives = objectives
        self.default_segment_s = default_segment_s
        self.origin = origin  # monotonic time of the replay start
        self.fps = 0
        self._create_sent: float | None = None
        self._first_frame_seen = False
        self._last_idx: int | None = None
        self._anchor: tuple[float, int] | None = None  # (arrival, pts)
        self._reanchor = True
        self._playing_since: float | None = None
        self._playing_s = 0.0
        self._paused = False
        self._actions: deque[tuple[int, float]] = deque()
        self._interrupts: dict[int, float] = {}
        self._flushes: set[int] = set()
        self._directs: dict[int, _Direct] = {}
        self._segment_direct: dict[int, int] = {}
        self._segment: int | None = None
        self._guard: tuple[int, int | None] | None = None  # (ack pts, interrupted segment)

    # ---- session lifecycle -------------------------------------------------------------------------

    def create_sent(self, t: float) -> None:
        self._create_sent = t

    def admitted(self, t: float, fps: int, session_id: str | None = None) -> None:
        self.result.status, self.fps, self.result.session_id = "admitted", fps, session_id
        self.result.admitted_at_s = round(t - self.origin, 3)

    def rejected(self, reason: str, retry_after_s: float | None, t: float) -> None:
        self.result.status, self.result.reason, self.result.retry_after_s = "rejected", reason, retry_after_s
        self.result.ended_at_s = round(t - self.origin, 3)

    def failed(self, reason: str, t: float) -> None:
        self.result.status, self.result.reason = "failed", reason
        if self.result.ended_at_s is None:
            self.result.ended_at_s = round(t - self.origin, 3)

    def connected(self, t: float) -> None:
        self._reanchor = True

    def disconnected(self, t: float) -> None:
        # a detach: the user sees no frame until it comes back, so an action sent just before is not
        # timed over the absence (its photon was never shown): unresolved, as at a pause
        self._stop_playing(t)
        self._drop_pending_actions()

    def paused(self, t: float) -> None:
        self._paused = True
        self._stop_playing(t)
        self._drop_pending_actions()

    def resumed(self, t: float) -> None:
        self._paused = False
        self._reanchor = True

    def ended(self, t: float) -> None:
        self._stop_playing(t)
        self.result.ended_at_s = round(t - self.origin, 3)
        self._drop_pending_actions()
        self._settle_directs()

    def _drop_pending_actions(self) -> None:
        self.result.actions_unresolved += len(self._actions)
        self._actions.clear()

    # ---- what was sent ------------------------------------------------------------------------------

    def action_sent(self, seq: int, t: float) -> None:
        self._actions.append((seq, t))

    def direct_sent(self, request_id: int, seconds: float | None, t: float) -> None:
        self._directs[request_id] = _Direct(t, seconds if seconds is not None else self.default_segment_s)

    def interrupt_sent(self, request_id: int, t: float) -> None:
        self._interrupts[request_id] = t

    def flush_sent(self, request_id: int, t: float) -> None:
        self._flushes.add(request_id)

    # ---- what arrived -------------------------------------------------------------------------------

    def segment_start(self, segment: int, re: int | None, t: float, pts: int | None = None,
                      play_at: float | None = None) -> None:
        """`play_at`: when the client may start playing it (the server's advice; None: at once)."""
        if re is None:
            waiting = [i for i, d in self._directs.items() if d.segment is None]
            re = waiting[0] if waiting else None
        if re is not None and re in self._directs:
            direct = self._directs[re]
            direct.segment, direct.play_at, direct.start_pts = segment, play_at, pts
            self._segment_direct[segment] = re

    def segment_end(self, segment: int, re: int | None, status: str, t: float) -> None:
        request = re if re is not None else self._segment_direct.get(segment)
        direct = self._directs.get(request) if request is not None else None
        if direct is None:
            return
        direct.status = status
        if status == "done":
            self.result.segments_done += 1
            end = direct.last if direct.last is not None else t
            ms = (end - direct.sent) * 1000.0
            self.result.segment_ms.append(ms)
            if ms > direct.seconds * 1000.0:
                self.result.segments_late += 1
        elif status == "interrupted":
            self.result.segments_interrupted += 1

    def ack(self, re: int, pts: int | None, t: float) -> None:
        sent = self._interrupts.pop(re, None)
        if sent is not None:
            self.result.interrupt_ms.append((t - sent) * 1000.0)
            self._guard = (-1 if pts is None else pts, self._segment if self.result.mode == "director" else None)
        elif re in self._flushes:
            self._flushes.discard(re)
            self._guard = (-1 if pts is None else pts, None)

    def frame(self, pts: int, idx: int, segment: int, action_seq: int, disc: bool, t: float) -> None:
        r = self.result
        r.frames_received += 1
        r.frame_times_s.append(round(t - self.origin, 4))
        if self.fps and (pts != pts_for(idx, self.fps) or (self._last_idx is not None
                                                                    and idx != self._last_idx + 1)):
            r.pts_errors += 1
        self._last_idx = idx
        self._check_stale(pts, segment, disc)
        if not self._first_frame_seen:
            self._first_frame_seen = True
            if r.mode == "world" and self._create_sent is not None:
                r.ttff_ms.append((t - self._create_sent) * 1000.0)
        if segment != self._segment:
            self._segment = segment
            self._reanchor = True
        self._director_frame(segment, pts, t)
        self._deadline(pts, disc, t)
        if self._playing_since is None and not self._paused:
            self._playing_since = t
        while self._actions and self._actions[0][0] <= action_seq:
            r.action_to_photon_ms.append((t - self._actions.popleft()[1]) * 1000.0)

    def media(self, pts: int, idx: int, n: int, segment: int, action_seq: int, disc: bool, t: float) -> None:
        """An fMP4 fragment: n frames from idx, the first at pts, each later one at its offset on
        the session timeline; only the first can be a `disc`."""
        if not self.fps:
            raise RuntimeError(f"session {self.result.key}: media arrived before admission gave its fps")
        base = pts_for(idx, self.fps)
        for i in range(n):
            self.frame(pts + pts_for(idx + i, self.fps) - base, idx + i, segment, action_seq, disc and i == 0, t)

    # ---- internals ------------------------------------------------------------------------------------

    def _check_stale(self, pts: int, segment: int, disc: bool) -> None:
        if self._guard is None:
            return
        ack_pts, old_segment = self._guard
        if pts <= ack_pts:
            return
        if disc and segment != old_segment:
            self._guard = None
        else:
            self.result.stale_frames_after_ack += 1

    def _director_frame(self, segment: int, pts: int, t: float) -> None:
        request = self._segment_direct.get(segment)
        direct = self._directs.get(request) if request is not None else None
        if direct is None:
            return
        if direct.first is None:
            direct.first = t
            self.result.ttff_ms.append((t - direct.sent) * 1000.0)
            start = t if direct.play_at is None else max(t, direct.play_at)
            direct.start_delay_ms = (start - direct.sent) * 1000.0
            self.result.start_delay_ms.append(direct.start_delay_ms)
            self.result.start_events.append({"at_s": round(direct.sent - self.origin, 3), "segment": segment,
                                             "start_delay_ms": round(direct.start_delay_ms, 1)})
            direct.playing = (start, pts if direct.start_pts is None else direct.start_pts)
        elif direct.playing is not None:
            anchor_t, anchor_pts = direct.playing
            due = anchor_t + pts_seconds(pts - anchor_pts)
            if t > due:  # the player waited for this frame: one stall, then it goes on from here
                self._stall(t, due, segment, direct.frames)
                direct.playing, direct.stalled = (t, pts), True
        direct.last = t
        direct.frames += 1

    def _deadline(self, pts: int, disc: bool, t: float) -> None:
        if self._reanchor or disc or self._anchor is None:
            self._anchor, self._reanchor = (t, pts), False
            return
        anchor_t, anchor_pts = self._anchor
        due = anchor_t + pts_seconds(pts - anchor_pts) + self.objectives.playout_ms / 1000.0
        if t > due:
            self.result.deadline_misses += 1
            self._anchor = (t, pts)
            if self.result.mode == "world":
                self._stall(t, due, None, None)

    def _stall(self, t: float, due: float, segment: int | None, frame: int | None) -> None:
        r = self.result
        r.stalls += 1
        r.stall_s += t - due
        r.stall_events.append({"at_s": round(t - self.origin, 3), "late_ms": round((t - due) * 1000.0, 1),
                               "segment": segment, "frame_in_segment": frame})

    def _stop_playing(self, t: float) -> None:
        if self._playing_since is not None:
            self._playing_s += t - self._playing_since
            self._playing_since = None
        self._reanchor = True

    def _settle_directs(self) -> None:
        r = self.result
        if r.mode == "world":
            r.frames_expected = round(self._playing_s * self.fps)
            return
        expected = 0
        bound_ms = self.objectives.director_start_delay_p95_s * 1000.0
        for direct in self._directs.values():
            unanswered = direct.first is None and direct.status is None
            if direct.status == "done":
                expected += round(direct.seconds * self.fps)
            else:
                expected += direct.frames
                if unanswered:
                    r.directs_unanswered += 1
            if direct.start_delay_ms is not None or unanswered:
                r.segments_judged += 1
                r.segments_missed += unanswered or direct.stalled or (direct.start_delay_ms or 0.0) > bound_ms
        r.frames_expected = expected
