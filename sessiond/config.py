"""`ServeConfig`: every setting of the daemon, built from defaults, a --config JSON file and
flags (flags win). Bad values fail here, at construction, naming the option to change."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.api import ATTENTION_CHOICES
from sessiond.errors import ServeConfigError

__all__ = ["LOG_LEVELS", "ServeConfig", "config_from_args"]

LOG_LEVELS = ("debug", "info", "warning")

_POSITIVE = (
    "window_s", "idle_offload_s", "idle_close_s", "unconnected_close_s", "reclaim_after_s", "default_segment_s",
    "hello_timeout_s",
    "director_ttff_s", "director_lead_s", "admission_wait_s", "calibration_budget_s", "viewer_ping_s",
    "viewer_silence_s", "objective_world_a2p_p95_ms", "objective_director_start_delay_p95_s",
    "spectator_cpu_cores", "spectator_cpu_each", "spectator_cpu_each_floor", "spectator_stall_s",
)
_SHARES = ("objective_world_miss_rate", "objective_director_risk", "admission_margin")
_POSITIVE_INT = ("max_message_bytes", "max_actions_per_s", "max_prompt_chars", "max_batch", "max_sessions",
                 "outbox_chunks", "max_pending_messages", "abuse_errors_per_10s", "max_requests_per_s",
                 "spectator_connects_per_s", "spectator_queue_frames")


@dataclass(frozen=True)
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    model: str = "demo"
    device: str | None = None  # None: cuda when present, else cpu
    redis_url: str | None = None
    log_json: bool = False
    log_level: str | None = None  # debug | info | warning for every logger; None: ours at info, chatty libraries at warning
    record: str | None = None  # write the recorded trace here at shutdown
    policy: str = "duty"  # admission policy: duty (measured cost, objectives), kv (KV pool only), one-per-gpu, fifo
    admission_margin: float = 0.15  # the prior of the measured margin: policies plan for 1 - margin of the engine
    # the objectives every admitted session is promised (published in /v1/capacity)
    objective_world_miss_rate: float = 0.01  # world: share of frames allowed after their playback deadline
    objective_world_a2p_p95_ms: float = 1500.0  # world: action-to-photon p95
    objective_director_start_delay_p95_s: float = 1.5  # director: `direct` -> playback may start, p95
    objective_director_risk: float = 0.05  # director: share of segments allowed to miss (start delay or a stall)
    kv_budget_bytes: int | None = None
    admission_wait_s: float = 20.0  # one-per-gpu: a create waits this long in the FIFO before its 503 (under
    # the usual 30 s HTTP client timeout, so that a waiting client hears the 503 rather than timing out)
    calibration_budget_s: float = 60.0  # duty/fifo/one-per-gpu: most seconds of the start-up cost profile
    cpu_threads: int | None = None  # torch intra-op threads; None: half the CPU cores, 1 to 4 (engine_threads)
    attention: str = "auto"  # the engine's attention backend (engine.api.ATTENTION_CHOICES); auto: measured at warm-up
    strategy: str | None = None  # an execution-strategy file (sessiond/runtime/strategy.py); None: the default
    # a measured cost profile each engine step is paced to (sessiond/runtime/paced_engine.py): rehearsing a GPU's
    # admission and scheduling with a small model on another machine; None: the engine's own pace
    pace_profile: str | None = None
    pace_scale: float = 1.0  # the pace profile's compute seconds times this (a GPU at a cost it does not reach yet)
    # this machine's earlier starts (sessiond/admission/start_verdict.py): the verdict stays the same from start
    # to start where it sits at its edge; None: no history (`sessiond serve` defaults to ~/.cache/sessiond/starts.jsonl)
    start_history: str | None = None
    # sessions
    lead_chunks: float | None = None  # world: chunks generated ahead of the playback clock; None: the model's (2; demo 1)
    # world: lead_chunks is the most; a session alone on the engine begins chunks as late as its own chunks
    # measured they may (sessiond/session/lead.py). True: always lead_chunks
    fixed_lead: bool = False
    idle_offload_s: float = 30.0  # idle this long: KV goes to host memory (sessiond/runtime/idle_offload.py)
    idle_close_s: float = 600.0  # idle this long: the session is closed
    unconnected_close_s: float = 30.0  # created and never connected this long: released (sessiond/runtime/unconnected.py)
    # idle this long with nobody attached: closed when a newcomer would otherwise be refused for capacity
    # (sessiond/runtime/abandoned.py)
    reclaim_after_s: float = 60.0
    picture_check: bool = True  # the served model checks its own picture, one frame per second (sessiond/session/picture.py)
    default_segment_s: float = 5.0  # director: `direct` without `seconds`
    director_ttff_s: float = 1.0  # director: first frame objective (scheduling deadline)
    director_lead_s: float = 10.0  # director: most media generated ahead of the segment's playback
    max_sessions: int = 64
    # scheduler
    max_batch: int = 8
    outbox_chunks: int = 4  # generated-but-unsent chunks a session may hold
    # wire limits
    max_message_bytes: int = 65536
    max_actions_per_s: int = 240
    max_prompt_chars: int = 2000
    window_s: float = 1.0  # `received` window, seconds of media
    hello_timeout_s: float = 10.0
    # viewers gone without a goodbye: a WebSocket is pinged this often and closed when its pong is this
    # late; a WebRTC viewer that leaves our media unanswered by RTCP this long is closed
    viewer_ping_s: float = 2.0
    viewer_silence_s: float = 3.0
    max_pending_messages: int = 256  # control replies queued for a connection before it is abusive
    abuse_errors_per_10s: int = 50  # bad messages from one connection before it is closed
    max_requests_per_s: int = 50  # requests other than action/received per connection; excess: rate_limited
    # spectators (share links; sessiond/session/audience.py, sessiond/admission/audience.py)
    spectator_cpu_cores: float = 1.0  # CPU (cores) all spectators' packing and sending may take; past it: capacity
    spectator_cpu_each: float = 0.005  # cores one more spectator costs (sending; shared packing is measured):
    # the prior until the daemon has measured its sends (sessiond/admission/audience.py);
    # loadtest.spectators measured 0.0001-0.001 on the 2-core box (results/spectators): 5x that at least
    # the least a spectator is taken to cost once its sends are measured: the send (measured) is a small part of a
    # spectator's whole cost (0.0002-0.0003 of 0.0015 cores with demo frames, docs/performance.md), the floor is that whole
    spectator_cpu_each_floor: float = 0.0015
    spectator_connects_per_s: int = 20  # spectator connects per session per second (burst twice that)
    spectator_stall_s: float = 10.0  # a spectator socket that takes nothing this long is dropped
    spectator_queue_frames: int = 30  # frames queued per spectator before it skips ahead (2 s at 15 fps)
    webrtc_hosts: tuple[str, ...] = field(default_factory=tuple)
    # origins whose pages may call this daemon's HTTP API from the browser (a fleet gateway's pages
    # post WebRTC offers to the worker); empty: same origin only
    cors_origins: tuple[str, ...] = field(default_factory=tuple)
    api_keys: str | None = None  # a file of API keys (sessiond.api_keys): creating a session then needs one
    web_dir: str | None = None  # default: the repository's web/ folder

    def __post_init__(self) -> None:
        for name in _POSITIVE:
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ServeConfigError(name, f"must be a positive number, got {value!r}")
        for name in _POSITIVE_INT:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ServeConfigError(name, f"must be a positive integer, got {value!r}")
        for name in _SHARES:
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value < 1:
                raise ServeConfigError(name, f"must be a number in [0, 1), got {value!r}")
        if self.lead_chunks is not None and (not isinstance(self.lead_chunks, int | float)
                                             or isinstance(self.lead_chunks, bool) or self.lead_chunks <= 0):
            raise ServeConfigError("lead_chunks", f"must be a positive number, got {self.lead_chunks!r}")
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ServeConfigError("port", f"must be an integer in 0..65535, got {self.port!r}")
        if self.idle_close_s < self.idle_offload_s:
            raise ServeConfigError("idle_close_s", f"must be >= idle_offload_s ({self.idle_offload_s}), "
                              f"got {self.idle_close_s}")
        if self.kv_budget_bytes is not None and (not isinstance(self.kv_budget_bytes, int)
                                                 or self.kv_budget_bytes <= 0):
            raise ServeConfigError("kv_budget_bytes", f"must be a positive integer, got {self.kv_budget_bytes!r}")
        if self.cpu_threads is not None and (not isinstance(self.cpu_threads, int) or isinstance(self.cpu_threads, bool)
                                             or self.cpu_threads < 1):
            raise ServeConfigError("cpu_threads", f"must be a positive integer, got {self.cpu_threads!r}")
        if self.attention not in ATTENTION_CHOICES:
            raise ServeConfigError("attention", f"must be one of {', '.join(ATTENTION_CHOICES)}, got {self.attention!r}")
        if self.log_level is not None and self.log_level not in LOG_LEVELS:
            raise ServeConfigError("log_level", f"must be one of {', '.join(LOG_LEVELS)}, got {self.log_level!r}")
        for origin in self.cors_origins:
            if origin != "*" and not re.fullmatch(r"https?://[^/\s]+", origin):
                raise ServeConfigError("cors_origins", f"each must be * or scheme://host[:port] with no path, got {origin!r}")
        if not isinstance(self.model, str) or not self.model:
            raise ServeConfigError("model", "must be a model config name such as demo or tiny")
        if self.pace_profile is not None:
            from sessiond.runtime.paced_engine import PaceProfile, PaceProfileError

            try:
                PaceProfile.load(self.pace_profile)  # read now: a bad file stops the start before anything runs
            except PaceProfileError as exc:
                raise ServeConfigError("pace_profile", str(exc)) from exc
        if isinstance(self.pace_scale, bool) or not isinstance(self.pace_scale, int | float) or not self.pace_scale > 0:
            raise ServeConfigError("pace_scale", f"must be a positive factor, got {self.pace_scale!r}")
        if self.pace_scale != 1.0 and self.pace_profile is None:
            raise ServeConfigError("pace_scale", "scales a pace profile: give --pace-profile FILE too")

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> ServeConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        for key in values:
            if key not in known:
                raise ServeConfigError(key, f"unknown option; valid options: {', '.join(sorted(known))}")
        values = dict(values)
        for name, what in (("webrtc_hosts", "IP addresses"), ("cors_origins", "origins such as http://host:8000")):
            if name in values:
                items = values[name]
                if isinstance(items, str):
                    items = [h for h in items.split(",") if h]
                if not isinstance(items, list | tuple) or not all(isinstance(h, str) for h in items):
                    raise ServeConfigError(name, f"must be a list of {what}")
                values[name] = tuple(items)
        return cls(**values)

    @classmethod
    def from_json_file(cls, path: str, overrides: dict[str, Any] | None = None) -> ServeConfig:
        try:
            data = json.loads(Path(path).read_text())
        except OSError as exc:
            raise ServeConfigError("config", f"cannot read {path}: {exc.strerror}") from exc
        except json.JSONDecodeError as exc:
            raise ServeConfigError("config", f"{path} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ServeConfigError("config", f"{path} must hold a JSON object of options")
        data = {k.replace("-", "_"): v for k, v in data.items()}
        data.update(overrides or {})
        return cls.from_mapping(data)

    def engine_threads(self, device: str, cores: int | None = None) -> int | None:
        """torch threads for the engine on `device`: the configured number, else on CPU half the
        cores (at least 1, at most 4; the other half encodes and sends frames), left to torch on
        accelerators. Measured on a 2-core box, demo model, one world session: 1 thread 11.3
        frames/s, 2 threads 17.3 when idle but 3.2 (vs 10.6 for 1) with other load: hence not all."""
        if self.cpu_threads is not None:
            return self.cpu_threads
        if device != "cpu":
            return None
        available = cores if cores is not None else (os.cpu_count() or 1)
        return max(1, min(4, available // 2))

    def window_frames(self, fps: int) -> int:
        return max(1, round(self.window_s * fps))


_FLAG_OPTIONS = ("host", "port", "model", "device", "redis_url", "log_json", "log_level", "idle_offload_s", "idle_close_s",
                 "unconnected_close_s", "reclaim_after_s", "lead_chunks", "record", "policy", "max_sessions", "max_batch", "kv_budget_bytes",
                 "webrtc_hosts", "cors_origins", "web_dir", "api_keys", "cpu_threads", "admission_wait_s", "calibration_budget_s",
                 "attention", "strategy", "start_history", "admission_margin", "objective_world_miss_rate", "objective_world_a2p_p95_ms",
                 "objective_director_start_delay_p95_s", "objective_director_risk", "pace_profile",
                 "pace_scale")


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    """Defaults < --config JSON < flags given on the command line."""
    given: dict[str, Any] = {}
    for name in _FLAG_OPTIONS:
        value = getattr(args, name, None)
        if value is not None and value is not False:
            given[name] = value
    if getattr(args, "no_picture_check", False):
        given["picture_check"] = False
    if getattr(args, "fixed_lead", False):
        given["fixed_lead"] = True
    if given.get("start_history") == "off":
        del given["start_history"]
    if getattr(args, "config", None):
        return ServeConfig.from_json_file(args.config, given)
    return ServeConfig.from_mapping(given)
