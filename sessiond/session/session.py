"""`Session`: composes the parts that each own one thing — lifecycle (`sessiond.session.lifecycle`),
the action timeline, the output stream, the playback clock, the director segment, the stats
meter, the connection — and says what it asks of the scheduler (chunks, with deadlines) and of
the engine (queued EngineOps). It is the only writer of its state: the scheduler, admission's
overrun answer, the fleet's hand-off and the client's requests (dispatched by
`sessiond.session.inbound`) all call its methods. Transports reach it through
`sessiond.session.port`."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.api import ChunkFrames
from protocols.errors import ErrorCode
from protocols.messages import Ack, Error, Picture, Pong, Presence, SegmentEnd, SegmentStart, Stats
from protocols.timeline import pts_for
from sessiond.grants import Grant, Role, issue, revoke
from sessiond.logs import log_event
from sessiond.session.actions import ActionTimeline
from sessiond.session.audience import Audience
from sessiond.session.clock import PlaybackClock
from sessiond.session.connection import Connection
from sessiond.session.coplay import CoPlay
from sessiond.session.env import SessionEnv
from sessiond.session.jobs import ChunkJob, EngineOp, Op
from sessiond.session.lead import WorldLead
from sessiond.session.lifecycle import Lifecycle, SessionState
from sessiond.session.output import OutputStream
from sessiond.session.picture import PictureMonitor
from sessiond.session.relay import relay
from sessiond.session.segments import Segment, end_marker, start_marker
from sessiond.session.stats import StatsMeter
from sessiond.store.base import SessionRecord
from transports.interface import OutChunk, OutFrame

if TYPE_CHECKING:  # the client requests' types, read only in annotations
    from protocols.messages import Action, Direct, Flush, Interrupt, Moved, Pause, Ping, Received, Resume

__all__ = ["Session"]

logger = logging.getLogger(__name__)


class Session:
    def __init__(self, record: SessionRecord, env: SessionEnv, public: dict[str, Any], *,
                 restored: bool = False) -> None:
        now = time.monotonic()
        self.id = record.session_id
        self.record = record
        self.mode = record.mode
        self.env = env
        self.public = public  # the create response minus the token
        self.life = Lifecycle(self.id)
        self.out = OutputStream(record.fps, env.window_frames, record.frames_sent, disc=restored)
        self.actions = ActionTimeline(env.action_space, env.max_actions_per_s)
        self.coplay = CoPlay(env.action_space, record.players, env.max_actions_per_s)  # players 1.. beside the owner
        self.spectators = 0  # spectator connections now (their fan-out counts them in)
        self._presence_sinks: dict[object, Callable[[Presence], None]] = {}  # non-owner connections
        self.clock = PlaybackClock(record.fps, now, self.out.total)
        self.meter = StatsMeter(env.frames_per_chunk / record.fps, now, self.out.sent)
        self.prompt = record.prompt
        self.connection: Connection | None = None
        self.paused = False
        self.job: ChunkJob | None = None
        self.ops: list[EngineOp] = []
        self.segment: Segment | None = None
        self.idle_since = now
        self.fault: str | None = None
        self.chunks_done = 0
        # the next chunk starts a decoder stream (the session's first, or the first after a cut): a
        # causal decoder makes fewer frames of it (Wan: 9 of 12, tiny 5 of 8), so plans add the lead-in
        self.fresh_stream = True
        self.lead_override: float | None = None  # admission's overrun handling may cut the world lead
        chunk_s = env.frames_per_chunk / record.fps
        self.lead = WorldLead(env.lead_chunks * chunk_s, chunk_s, adaptive=env.adaptive_lead)
        self._lead_anchors = -1  # the clock's re-anchor count when the last world chunk began
        self.audience = Audience(self.id, env.metrics)  # spectators: fed the frames the owner got
        self.picture = PictureMonitor(record.fps) if env.check_picture is not None else None
        self._picture_task: asyncio.Task[None] | None = None
        self._relay: asyncio.Task[int] | None = None  # takes the output while co-players play without the owner
        record.state = self.life.state.label  # a resumed record starts over as `created`

    # ---- lifecycle ---------------------------------------------------------------------------
    @property
    def state(self) -> SessionState:
        return self.life.state

    def set_state(self, to: SessionState, **fields: Any) -> None:
        was = self.state
        if self.life.to(to):
            self.record.state = to.label
            # idle since it went idle: an offload moves its KV, not the time it has been idle
            if to in (SessionState.IDLE, SessionState.OFFLOADED) and not (
                    was == SessionState.IDLE and to == SessionState.OFFLOADED):
                self.idle_since = time.monotonic()
            log_event(to.label, self.id, mode=self.mode, **fields)
            self.env.persist(self.id)

    def touch(self) -> None:
        self.record.last_active_at = time.time()

    def settle(self) -> None:
        """ACTIVE while it demands generation or plays to a viewer, else IDLE. A world session is
        busy while someone steers it (its owner or a connected co-player) and it is not paused;
        spectators alone never make it busy, so it idles, offloads and closes as if unwatched."""
        if self.state.terminal or self.state == SessionState.OFFLOADED:
            return
        busy = self.segment is not None if self.mode == "director" else (self.steering and not self.paused)
        self.set_state(SessionState.ACTIVE if busy else SessionState.IDLE)

    @property
    def steering(self) -> bool:
        """Someone steers it: its owner's connection, or (co-play) a connected co-player's."""
        return self.connection is not None or any(seat.connected for seat in self.coplay.seated)

    @property
    def relaying(self) -> bool:
        """Its co-players play without its owner: the relay takes the output (sessiond.session.relay)."""
        return (self.connection is None and self.mode == "world" and not self.state.terminal
                and any(seat.connected for seat in self.coplay.seated))

    def wake_from_offload(self) -> None:
        if self.state == SessionState.OFFLOADED:
            self.ops.append(EngineOp(Op.RESTORE))
            self.set_state(SessionState.IDLE)
            log_event("restoring", self.id)

    def offload(self, **fields: Any) -> bool:
        """An idle session without a chunk in the engine moves its KV to host memory (False:
        not idle, nothing done)."""
        if self.state != SessionState.IDLE or self.job is not None:
            return False
        self.ops.append(EngineOp(Op.OFFLOAD))
        self.set_state(SessionState.OFFLOADED, **fields)
        return True

    def restore_failed(self) -> None:
        """The engine had no KV memory to restore it: it stays offloaded and the viewer hears why."""
        if self.state.terminal:
            return
        if self.state == SessionState.ACTIVE:
            self.set_state(SessionState.IDLE)
        self.set_state(SessionState.OFFLOADED)
        self.push_control(Error(code=ErrorCode.CAPACITY.value, fatal=False,
                                message="no KV memory free to restore this session; retry shortly"))

    def degrade_lead(self, duty: float, prior: float) -> None:
        """Admission names this world session over its prior: keep one chunk of lead."""
        if self.lead_override is None:
            log_event("lead_degraded", self.id, duty=round(duty, 3), prior=prior)
        self.lead_override = 1.0

    def restore_lead(self) -> None:
        if self.lead_override is not None:
            self.lead_override = None
            log_event("lead_restored", self.id)

    def freeze(self) -> None:
        """Handed to another daemon: nothing more is generated or run in the engine here, and the
        unsent frames go (the stored position is what the viewer got)."""
        self.job = None
        self.segment = None
        self.ops.clear()
        self.drop_output("moved")

    def move_away(self, moved: Moved | None) -> None:
        """A frozen session's viewer is told where it went (when known) and its connection ends."""
        self.audience.end_all("moved", moved)  # spectators follow the session too
        if self.connection is None:
            return
        if moved is not None:
            self.push_control(moved)
        self.connection.end()
        self.out.event.set()

    def hang_up(self) -> None:
        """The daemon stops: the connection closes (its transport sees it at once); the session
        itself stays as it is, for its snapshot and record."""
        self.audience.end_all("daemon_stop")
        if self.connection is not None:
            self.connection.close()
            self.out.event.set()

    def snapshot(self) -> bool:
        """Queue a continuation snapshot of a generating session (once); True when queued."""
        if self.state != SessionState.ACTIVE or any(op.kind == Op.SNAPSHOT for op in self.ops):
            return False
        self.ops.append(EngineOp(Op.SNAPSHOT))
        return True

    def take_ops(self) -> list[EngineOp]:
        """The engine operations queued so far, in order (the scheduler runs them now)."""
        ops, self.ops = self.ops, []
        return ops

    def fail(self, code: ErrorCode, message: str) -> None:
        if self.state.terminal:
            return
        self.fault = message
        self.job = None
        self.segment = None
        self.audience.end_all("session_failed", Error(code=code.value, message=message, fatal=True))
        if self.connection is not None:
            self.out.push_control(Error(code=code.value, message=message, fatal=True))
            self.connection.end()
        self.set_state(SessionState.FAILED, code=code.value)

    def close(self) -> None:
        if self.state.terminal:
            return
        self.job = None
        self.segment = None
        self.audience.end_all("session_closed", Error(code=ErrorCode.NOT_FOUND.value, fatal=True,
                                                      message="the session was closed by its owner"))
        if self.connection is not None:
            self.connection.close()
            self.connection = None
        self.out.bump()
        self.set_state(SessionState.CLOSED)

    # ---- connections -------------------------------------------------------------------------
    def attach(self, connection: Connection) -> None:
        """A new connection takes over (the old one is closed); one that arrives after the
        session ended is closed at once."""
        if self.state.terminal:
            connection.close()
            return
        if self.connection is not None:
            self.connection.close()
        self.connection = connection
        self.out.reset_connection()
        # (frames the relay had handed out but not yet sent count too: the timeline never skips)
        if self.out.sent > 0 or self.out.media_frames or self.out.next_idx > self.out.sent:
            self.drop_output("reconnect")
        self.clock.reanchor(time.monotonic(), self.out.total)
        self.touch()
        self.env.record_event(self.id, "attach", {"media": connection.media})
        log_event("attached", self.id, media=connection.media, pts_next=pts_for(self.out.sent, self.record.fps))
        if self.mode == "world" and not self.paused:
            self.wake_from_offload()
        if self.picture is not None and self.picture.degraded:  # the new viewer hears it too
            v = self.picture.verdict()
            self.push_control(Picture(ok=v.ok, why=v.why, avatar=v.avatar, pattern=v.pattern, bound=v.bound))
        self.settle()
        self.announce_presence()
        self.env.wake()

    def detach(self, connection: Connection) -> None:
        if self.connection is not connection:
            return
        self.connection = None
        self.drop_output("detach")
        self.stop_generation()
        if self.segment is not None:
            self.end_segment("interrupted", notify=False)
        self.ops.append(EngineOp(Op.SNAPSHOT))
        self.env.record_event(self.id, "detach", {})
        log_event("detached", self.id)
        self._start_relay()  # co-players still connected play on
        self.settle()
        self.announce_presence()
        self.env.persist(self.id)
        self.env.wake()

    # ---- output ------------------------------------------------------------------------------
    def drop_output(self, reason: str) -> None:
        dropped = self.out.bump()
        if dropped:
            self.env.metrics.frames_dropped.labels(reason=reason).inc(dropped)

    def stop_generation(self) -> None:
        """Discard the chunk in progress and roll the engine back to the last delivered chunk. An
        offloaded session is restored first: the engine rolls back only a session whose KV it holds."""
        self.job = None
        self.wake_from_offload()
        self.ops.append(EngineOp(Op.ROLLBACK))

    def push_control(self, message: Any) -> None:
        if self.connection is None:
            return
        if self.out.push_control(message) > self.env.max_pending_messages:
            self.out.control.clear()
            self.out.push_control(Error(code=ErrorCode.RATE_LIMITED.value, fatal=True,
                                        message="too many requests waiting for replies; read your socket"))
            self.connection.end()
            self.env.metrics.protocol_errors.labels(code=ErrorCode.RATE_LIMITED.value).inc()

    def on_sent(self, frame: OutFrame) -> None:
        now = time.monotonic()
        if self.mode == "world" and self.clock.position(now) > frame.idx + 1:
            # the wire is behind the clock: playback began later than the clock assumed (it is
            # anchored when a connection attaches, and WebRTC's handshake takes a while after) or
            # the transport stalled. Follow the wire, so generation keeps its lead over what the
            # viewer plays; else the difference stays queued here for the whole session (found in
            # Chromium: 12 frames queued, action-to-photon 1.06 s instead of 0.3)
            self.clock.reanchor(now, frame.idx)
        reached = self.out.sent_one(frame)
        for chunk_index in reached:
            self.ops.append(EngineOp(Op.MARK_DELIVERED, chunk_index=chunk_index))
        if reached:
            self.env.wake()  # room in the outbox, and delivery marks to hand the engine
        self.env.metrics.frames_sent.inc()
        for latency in self.actions.photons(frame.action_seq, now):
            self.env.metrics.action_to_photon.observe(latency)
            if frame.players is not None:
                self.env.metrics.action_to_photon_player.labels(player="0").observe(latency)
        self.record.frames_sent = self.out.sent
        self.touch()
        self.env.persist(self.id)
        self.audience.frame(frame)  # the session's frame now: its spectators get it too

    def handed(self, message: Any) -> None:
        """A message was handed to the owner's connection: the segment markers go to spectators too."""
        if isinstance(message, SegmentStart | SegmentEnd):
            self.audience.message(message)

    # ---- grants (share links, invites) -------------------------------------------------------
    def share(self, role: Role, ttl_s: float | None, label: str) -> tuple[Grant, str]:
        """A new grant and its token (shown once); the record keeps its hash."""
        grant, token = issue(self.record.grants, role, time.time(), ttl_s, label)
        log_event("grant_issued", self.id, grant_id=grant.grant_id, role=grant.role)
        self.env.persist(self.id)
        return grant, token

    def revoke_grant(self, grant_id: str) -> int:
        """Revoke a grant; its connected spectators end at once. Returns how many ended."""
        revoke(self.record.grants, grant_id, time.time())
        ended = self.audience.revoke(grant_id)
        log_event("grant_revoked", self.id, grant_id=grant_id, ended=ended)
        self.env.persist(self.id)
        return ended

    async def reserve(self, chunk: OutChunk) -> None:
        """Before the chunk leaves: the store holds a position past its last frame (crash-safe
        time: a restart after a crash resumes there, never before a frame that may have gone out)."""
        if chunk.frames:
            await self.env.reserve(self.id, chunk.frames[-1].idx + 1)

    def stats(self, now: float) -> Stats | None:
        """The periodic `stats` message, at most once a second."""
        stats = self.meter.report(now, self.out.sent, self.out.media_frames)
        if stats is None or self.mode != "world":
            return stats
        return dataclasses.replace(stats, lead_ms=round(1000 * self.world_lead_s(), 1))

    # ---- what the scheduler sees -------------------------------------------------------------
    def has_room(self) -> bool:
        f = self.env.frames_per_chunk
        return self.out.media_frames + f <= self.env.outbox_chunks * f

    def demand(self, now: float) -> tuple[float, float] | None:
        """(deadline, start-by) of the next chunk this session wants, or None when it wants none.
        The scheduler begins the chunk once now >= start-by."""
        if self.job is not None or self.state in (SessionState.OFFLOADED, SessionState.CLOSED,
                                                  SessionState.FAILED):
            return None
        if not self.steering or not self.has_room() or self.ops_pending_restore():
            return None
        if self.mode == "world":
            if self.paused:
                return None
            total = self.out.total
            if self.clock.buffered(now, total) < 0:
                self.clock.reanchor(now, total)
            deadline = self.clock.dry_at(total)
            return deadline, deadline - self.world_lead_s()
        seg = self.segment
        if seg is None or seg.complete:
            return None
        deadline = seg.started_at + seg.delay_s + seg.frames_generated / self.record.fps  # its playback time
        return deadline, deadline - self.env.director_lead_s  # lossless, but never far ahead of playback

    def following_deadline(self, deadline: float) -> float | None:
        """When the chunk after the one due at `deadline` is due (its playback time), None when this
        session will want none after it (a director's segment ends with it)."""
        f = self.env.frames_per_chunk
        if self.mode == "director":
            seg = self.segment
            if seg is None or seg.frames_target - seg.frames_generated <= f:
                return None
        return deadline + f / self.record.fps

    def world_lead_s(self) -> float:
        """Seconds before its deadline a world chunk begins: the measured lead (`WorldLead`) while the
        session has the engine to itself, else the configured one; at most the one chunk admission
        leaves a session it names over its prior."""
        cap = None if self.lead_override is None else self.lead_override * self.lead.chunk_s
        return self.lead.lead_s(cap, shared=self.env.open_sessions() > 1)

    def ops_pending_restore(self) -> bool:
        return any(op.kind == Op.RESTORE for op in self.ops)

    def arrival(self, start_by: float) -> float:
        """When the request behind the next chunk arrived: a director segment's `direct`, a world
        chunk's moment of being due. Request-level FIFO serves chunks in this order."""
        if self.mode == "director" and self.segment is not None:
            return self.segment.started_at
        return start_by

    def begin_job(self, now: float, deadline: float, arrival: float | None = None) -> ChunkJob:
        """The chunk that begins now, conditioned on the owner's actions merged with every
        co-player's (sessiond.session.coplay; the owner's alone when nobody else plays)."""
        action, players = self.coplay.sample(self.actions.sample(), self.actions.last_seq)
        self.job = ChunkJob(action=action, action_seq=self.actions.last_seq,
                            segment=self.record.segment, started_at=now, deadline=deadline,
                            arrival=now if arrival is None else arrival, players=players)
        if self.mode == "world":  # measured for the lead only where its deadline follows its predecessor's
            steady = self.chunks_done > 0 and self.clock.anchors == self._lead_anchors
            self.job.start_by = arrival if steady else None
            self._lead_anchors = self.clock.anchors
        return self.job

    def on_frames(self, job: ChunkJob, chunk: ChunkFrames) -> None:
        """A decoded chunk of `job`: into the output stream (a segment keeps only its own frames)."""
        frames = chunk.frames
        if job is not self.job or self.state.terminal:
            self.env.metrics.frames_dropped.labels(reason="cancelled").inc(len(frames))
            return
        self.env.metrics.frames_generated.inc(len(frames))
        now = time.monotonic()
        if self.mode == "world":
            missed = self.clock.arrive(now, self.out.total) and self.chunks_done > 0
            if missed:
                self.env.metrics.deadline_misses.inc()
            if job.start_by is not None:
                self.lead.observe(now - job.start_by, missed)
        seg = self.segment
        if seg is not None:
            keep = seg.take(len(frames))
            if keep < len(frames):  # the segment's last chunk: its surplus frames are cut
                self.env.metrics.frames_dropped.labels(reason="segment_end").inc(len(frames) - keep)
                frames = frames[:keep]
            if not keep:
                return
            if not seg.start_sent:
                seg.start_sent = True
                self.out.push_marker(start_marker(seg, self.out, self.env.frames_per_chunk,
                                                  self.env.start_jitter_s))
        self.out.push_frames(chunk.chunk_index, frames, job.segment, job.action_seq, job.players)
        if self.picture is not None and self.picture.due(len(frames)):
            self._picture_task = asyncio.get_running_loop().create_task(self._check_picture(frames[-1]))

    async def _check_picture(self, frame: Any) -> None:
        """The model's check of one frame (off the loop); a change of verdict is told to the viewer."""
        check, monitor = self.env.check_picture, self.picture
        if check is None or monitor is None:
            return
        try:
            sample = await check(frame)
        except Exception:  # a broken check must not touch the stream: stop checking this session
            logger.exception("picture check failed for %s; no more checks for it", self.id)
            self.picture = None
            return
        verdict = monitor.observe(sample)
        if verdict is None or self.state.terminal:
            return
        if not verdict.ok:
            self.env.metrics.picture_degraded.inc()
        log_event("picture_degraded" if not verdict.ok else "picture_recovered", self.id, why=verdict.why,
                  avatar=verdict.avatar, pattern=verdict.pattern)
        self.push_control(Picture(ok=verdict.ok, why=verdict.why, avatar=verdict.avatar, pattern=verdict.pattern,
                                  bound=verdict.bound))

    def on_job_done(self, job: ChunkJob) -> float | None:
        """The chunk of `job` is finished; returns its engine wall time when it was the current job."""
        if job is not self.job:
            return None
        seconds = time.monotonic() - job.started_at
        self.meter.last_chunk_s = seconds
        self.job = None
        self.chunks_done += 1
        self.fresh_stream = False
        seg = self.segment
        if seg is not None and seg.complete:
            self.end_segment("done", notify=True)
            self.ops.append(EngineOp(Op.SNAPSHOT))
            self.settle()
        return seconds

    # ---- co-play (sessiond.session.coplay) -------------------------------------------------
    def join_player(self, player: int, grant_id: str, label: str = "") -> None:
        """A co-player's connection opened: its seat takes its actions from now on."""
        steering = self.steering
        seat = self.coplay.join(player, grant_id, label)
        log_event("player_joined", self.id, player=player, connections=seat.connections)
        if not steering and not self.state.terminal:  # nobody steered: its world plays for its co-players
            self._start_relay()
            self.settle()
            self.env.wake()
        self.announce_presence()

    def leave_player(self, player: int) -> None:
        """A co-player's connection ended: on its last one, whatever it held is let go (from the
        next chunk on)."""
        if self.coplay.leave(player):
            log_event("player_left", self.id, player=player)
            if not self.steering:
                self._steering_ended()
        self.announce_presence()

    def _start_relay(self) -> None:
        """Co-players play on without the owner: the relay takes the output in the owner's place
        (sessiond.session.relay), with no `received` window (each co-player has its own), nothing
        of the owner's held, and the playback clock anchored now, so generation resumes at once."""
        if not self.relaying:
            return
        self.out.reset_connection()  # the owner's unsent replies are nobody's now
        self.actions.release()  # what the owner held is let go while it is away, as a co-player's is
        self.clock.reanchor(time.monotonic(), self.out.total)
        if not self.paused:
            self.wake_from_offload()
        if self._relay is None or self._relay.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # driven by hand, without a loop (unit tests): nothing takes the output
                return
            self._relay = loop.create_task(relay(self))
            log_event("relaying", self.id, players=sum(1 for seat in self.coplay.seated if seat.connected))

    def _steering_ended(self) -> None:
        """The last steering connection (a co-player's; the owner's ends in `detach`) is gone: as on
        the owner's detach, unsent frames go, the engine rolls back to what was delivered, a
        snapshot is taken and the session idles (its spectators stay, with nothing to watch)."""
        if self.state.terminal:
            return
        self.drop_output("detach")  # also wakes the relay, which ends
        self.stop_generation()
        self.ops.append(EngineOp(Op.SNAPSHOT))
        self.settle()
        self.env.persist(self.id)
        self.env.wake()

    def act_as(self, player: int, msg: Action) -> Error | None:
        """A co-player's action into its own timeline; the error to answer it with, if any."""
        if player == 0:
            self.act(msg)
            return None
        problem = self.actions.check(msg)
        if problem is not None:
            field, why = problem
            self.env.metrics.protocol_errors.labels(code=ErrorCode.INVALID_FIELD.value).inc()
            return Error(code=ErrorCode.INVALID_FIELD.value, fatal=False,
                         message=f"action {msg.seq}, field `{field}`: {why}")
        verdict = self.coplay.accept(player, msg, time.monotonic())
        if verdict == "stale":
            return None
        self.env.metrics.actions.inc()
        if verdict == "coalesced":
            self.env.metrics.actions_coalesced.inc()
            return None
        # in the event log with its seat (docs/traces.md, co-play): a recorded trace replays every player
        self.env.record_event(self.id, "action", {**_action_fields(msg), "player": player})
        return None

    def player_sent(self, player: int, action_seq: int) -> None:
        """A frame that applied co-player `player`'s action `action_seq` went on its wire: its
        action-to-photon, measured on its own."""
        for latency in self.coplay.photons(player, action_seq, time.monotonic()):
            self.env.metrics.action_to_photon_player.labels(player=str(player)).observe(latency)

    def presence(self) -> Presence:
        return self.coplay.presence(self.connection is not None, self.spectators)

    def set_spectators(self, count: int) -> None:
        if count != self.spectators:
            self.spectators = count
            self.announce_presence()

    def invite_player(self, seat: int, now: float, ttl_s: float | None, label: str) -> tuple[Grant, str]:
        """A player grant on `seat` in this session's record (its token returned once)."""
        grant, token = issue(self.record.grants, Role.PLAYER, now, ttl_s, label or f"player {seat}", seat)
        self.env.persist(self.id)
        return grant, token

    def watch_presence(self, key: object, sink: Callable[[Presence], None]) -> None:
        """A non-owner connection (a co-player's, a spectator's) hears `presence` through `sink`
        (its own control queue); it gets the current one at once."""
        self._presence_sinks[key] = sink
        sink(self.presence())

    def unwatch_presence(self, key: object) -> None:
        self._presence_sinks.pop(key, None)

    def announce_presence(self) -> None:
        """`presence` to every connection of a co-play session or one with spectators (a session
        played alone and unwatched says nothing new)."""
        if self.record.players <= 1 and not self.spectators and not self._presence_sinks:
            return
        message = self.presence()
        if self.connection is not None:  # latest wins: a presence not yet sent is replaced
            self.out.drop_control(Presence)
            self.push_control(message)
        for sink in list(self._presence_sinks.values()):
            sink(message)

    # ---- director segments -------------------------------------------------------------------
    def start_segment(self, re: int | None, seconds: float) -> Segment:
        self.record.segment += 1
        frames = max(1, round(seconds * self.record.fps))
        # a stream's first chunk yields fewer frames (a causal decoder): the plan's lead-in, after a cut
        # too (until 2026-12-05 only for a session's first chunk: a director's segment after a cut
        # then played 3 frames ahead of its plan, and stalled on the H100 at 2x); until 2026-12-06 a
        # whole chunk, 9 frames more than Wan's first chunk lacks
        lead_in = self.env.lead_in_frames / self.record.fps if self.fresh_stream else 0.0
        planned = self.env.plan_start(self.id, frames / self.record.fps, lead_in)
        delay = self.env.director_ttff_s if planned is None else planned
        self.segment = Segment(id=self.record.segment, re=re, frames_target=frames, started_at=time.monotonic(),
                               delay_s=delay, planned=planned is not None, starts_stream=self.fresh_stream)
        self.env.persist(self.id)
        return self.segment

    def end_segment(self, status: str, *, notify: bool) -> None:
        seg = self.segment
        if seg is None:
            return
        self.segment = None
        log_event("segment_end", self.id, segment=seg.id, status=status)
        if not notify or self.connection is None:
            return
        build = end_marker(seg, status, self.out)
        if status == "done":
            self.out.push_marker(build)
        else:
            self.push_control(build())

    # ---- client requests (docs/protocol.md, client -> server; dispatched by inbound.py) -------
    def refuse(self, code: ErrorCode, message: str, re: int | None = None) -> None:
        """A request it cannot do: a non-fatal coded error, counted."""
        self.env.metrics.protocol_errors.labels(code=code.value).inc()
        self.push_control(Error(code=code.value, message=message, fatal=False, re=re))

    def act(self, msg: Action) -> None:
        """An action: checked against the model's action space, merged into the timeline."""
        problem = self.actions.check(msg)
        if problem is not None:
            field, why = problem
            self.refuse(ErrorCode.INVALID_FIELD, f"action {msg.seq}, field `{field}`: {why}")
            return
        verdict = self.actions.accept(msg, time.monotonic())
        if verdict == "stale":
            return
        self.env.metrics.actions.inc()
        if verdict == "coalesced":
            self.env.metrics.actions_coalesced.inc()
            return
        self.env.record_event(self.id, "action", _action_fields(msg))

    def received(self, msg: Received) -> None:
        self.out.received(msg.idx)

    def ping(self, msg: Ping) -> None:
        self.push_control(Pong(re=msg.id, ts=msg.ts))

    def direct(self, msg: Direct) -> None:
        """World: the prompt changes from the next chunk. Director: a new segment (replacing the
        running one; `cut` resets the scene, with `seed` when given)."""
        fields: dict[str, Any] = {"prompt": msg.prompt}
        if msg.seconds is not None:
            fields["seconds"] = msg.seconds
        if msg.cut:
            fields["cut"] = True
        if msg.seed is not None:
            fields["seed"] = msg.seed
        self.env.record_event(self.id, "direct", fields)
        self.push_control(Ack(re=msg.id))
        if self.mode == "world":
            self._set_prompt(msg.prompt)
            self.ops.append(EngineOp(Op.SET_PROMPT, prompt=msg.prompt))
            self.env.persist(self.id)
            return
        self.wake_from_offload()
        if self.segment is not None:  # a re-direction replaces the running segment
            self.drop_output("interrupt")
            self.end_segment("interrupted", notify=True)
            self.stop_generation()
        elif msg.cut:
            self.drop_output("cut")
        if msg.cut:
            if msg.seed is not None:
                self.record.seed = msg.seed
            self.ops.append(EngineOp(Op.RESET, seed=self.record.seed, prompt=msg.prompt))
            self.fresh_stream = True  # the engine session starts over: its decoder too
        elif msg.prompt != self.prompt:
            self.ops.append(EngineOp(Op.SET_PROMPT, prompt=msg.prompt))
        self._set_prompt(msg.prompt)
        self.start_segment(msg.id, msg.seconds if msg.seconds is not None else self.env.default_segment_s)
        self.settle()
        self.env.wake()

    def _set_prompt(self, prompt: str) -> None:
        self.prompt = self.record.prompt = prompt

    def interrupt(self, msg: Interrupt) -> None:
        """Every unsent frame is dropped (acked with the last pts sent), the running segment
        ends and generation stops; playback restarts from there."""
        self._take_back(msg, stop=True)

    def flush(self, msg: Flush) -> None:
        """Every unsent frame is dropped (acked with the last pts sent); playback restarts from
        there and generation goes on."""
        self._take_back(msg, stop=False)

    def _take_back(self, msg: Interrupt | Flush, *, stop: bool) -> None:
        self.env.record_event(self.id, msg.T, {})
        self.drop_output(msg.T)
        self.push_control(Ack(re=msg.id, pts=self.out.last_sent_pts()))
        if stop:
            if self.segment is not None:
                self.end_segment("interrupted", notify=True)
            self.stop_generation()
        self.clock.reanchor(time.monotonic(), self.out.total)
        if stop:
            self.settle()
        self.env.wake()

    def pause(self, msg: Pause) -> None:
        self.env.record_event(self.id, "pause", {})
        if self.mode == "world":
            self.paused = True
            self.settle()
        self.push_control(Ack(re=msg.id))

    def resume(self, msg: Resume) -> None:
        self.env.record_event(self.id, "resume", {})
        if self.mode == "world" and self.paused:
            self.paused = False
            self.clock.reanchor(time.monotonic(), self.out.total)
            self.wake_from_offload()
            self.settle()
            self.env.wake()
        self.push_control(Ack(re=msg.id))


def _action_fields(msg: Action) -> dict[str, Any]:
    """An accepted action as the event log keeps it (a recorded trace's `action`)."""
    fields: dict[str, Any] = {"seq": msg.seq, "keys": list(msg.keys)}
    if msg.mouse is not None:
        fields["mouse"] = list(msg.mouse)
    if msg.buttons is not None:
        fields["buttons"] = msg.buttons
    if msg.axes is not None:
        fields["axes"] = list(msg.axes)
    return fields
