"""Prometheus metrics, one registry per app (no global registry). Names start with sessiond_."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.sessions = Gauge("sessiond_sessions", "Sessions by lifecycle state", ["state"], registry=r)
        self.frames_generated = Counter("sessiond_frames_generated", "Frames decoded by the engine",
                                        registry=r)
        self.frames_sent = Counter("sessiond_frames_sent", "Frames put on the wire", registry=r)
        self.frames_dropped = Counter("sessiond_frames_dropped", "Frames generated but never sent",
                                      ["reason"], registry=r)
        self.step_seconds = Histogram("sessiond_step_seconds", "Engine step wall time by phase group",
                                      ["phase"], buckets=_LATENCY_BUCKETS, registry=r)
        self.chunk_seconds = Histogram("sessiond_chunk_seconds", "Chunk begin to decoded frames",
                                       buckets=_LATENCY_BUCKETS, registry=r)
        self.step_batch = Histogram("sessiond_step_batch_size", "Items per engine step",
                                    buckets=(1, 2, 4, 8, 16, 32), registry=r)
        self.engine_queue = Gauge("sessiond_engine_queue_depth", "Commands waiting for the engine thread",
                                  registry=r)
        self.outbox_frames = Gauge("sessiond_output_queue_frames", "Frames waiting in session output queues",
                                   registry=r)
        self.ready_sessions = Gauge("sessiond_scheduler_ready_sessions", "Sessions wanting a step",
                                    registry=r)
        self.action_to_photon = Histogram(
            "sessiond_action_to_photon_seconds", "Action receipt to the first frame conditioned on it sent",
            buckets=_LATENCY_BUCKETS, registry=r)
        self.action_to_photon_player = Histogram(
            "sessiond_coplay_action_to_photon_seconds",
            "Co-play: a player's action receipt to the first frame conditioned on it sent to that player "
            "(label: player index 0..7, so bounded)", ["player"], buckets=_LATENCY_BUCKETS, registry=r)
        self.actions = Counter("sessiond_actions", "Actions received", registry=r)
        self.actions_coalesced = Counter("sessiond_actions_coalesced",
                                         "Actions over the rate limit, merged into the held state",
                                         registry=r)
        self.admission = Counter("sessiond_admission_decisions", "Admission decisions",
                                 ["kind", "decision", "reason"], registry=r)
        self.kv_slabs = Gauge("sessiond_kv_slabs", "KV pool slabs", ["where"], registry=r)
        self.protocol_errors = Counter("sessiond_protocol_errors", "Errors sent to clients", ["code"],
                                       registry=r)
        self.engine_faults = Counter("sessiond_engine_faults", "Sessions ended by an engine fault",
                                     registry=r)
        self.unconnected_closed = Counter("sessiond_sessions_unconnected_closed",
                                          "Created sessions released because no client connected in time",
                                          registry=r)
        self.reclaimed = Counter("sessiond_sessions_reclaimed",
                                 "Sessions idle with nobody attached, closed to admit a new one", registry=r)
        self.store_errors = Counter("sessiond_store_errors", "Store operations that failed", registry=r)
        self.position_unguarded_frames = Counter(
            "sessiond_position_unguarded_frames",
            "Frames handed out while the store was down (their position not durable)", registry=r)
        self.deadline_misses = Counter("sessiond_world_deadline_misses",
                                       "World chunks ready after their playback deadline", registry=r)
        # spectators (sessiond/session/audience.py)
        self.spectators = Gauge("sessiond_spectators", "Spectator connections open", registry=r)
        self.spectator_frames_sent = Counter("sessiond_spectator_frames_sent", "Frames put on spectators' wires",
                                             registry=r)
        self.spectator_frames_skipped = Counter(
            "sessiond_spectator_frames_skipped", "Frames a lagging spectator skipped (its queue overflowed)",
            registry=r)
        self.spectators_dropped = Counter("sessiond_spectators_dropped", "Spectator connections ended by the daemon",
                                          ["reason"], registry=r)
        self.spectators_refused = Counter("sessiond_spectators_refused", "Spectator connects refused",
                                          ["reason"], registry=r)
        self.picture_degraded = Counter("sessiond_picture_degraded",
                                        "Times a session's picture degraded by its model's own check", registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)
