"""The execution strategy (`serve --strategy FILE`, TOML or JSON): where each stage runs and how many
engine replicas share the engine's device.

    name = "decoder-device"
    [engine]                  # the engine replicas: device ("engine": serve's --device), how many,
    replicas = 2              # and each one's share of the KV budget (--kv-budget-bytes, or on a CPU
    memory_fractions = [0.5, 0.5]   # the model's default); the shares of one device add up to <= 1
    [stages.decoder]          # text_encoder, dit, cache_pass, decoder, transport_encoder
    process = "engine"        # the process the stage runs in: "engine" (the daemon's engine thread),
    device = "cpu:1"          # "daemon" (its event loop's packing threads: the transport's encoder)
    stream = "default"        # "own": a CUDA stream of its own
    threads = 1               # a decoder on a CPU device of its own: its torch threads

Parsed into frozen dataclasses; every error names the field (`strategy.stages.decoder.device: ...`),
unknown keys are refused, and a placement this build cannot realise is refused in words rather
than accepted and ignored. `check_machine` is what `serve` runs before it binds or builds anything:
the devices exist, and per device the replicas' shares add up to at most 1 and each holds a session.
No file: `Strategy.default()`, exactly the daemon's behaviour without strategies.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sessiond.errors import ServeConfigError

__all__ = ["ENGINE", "STAGES", "EngineSpec", "MachineFacts", "ReplicaPlan", "StageSpec", "Strategy",
           "StrategyError", "check_machine", "load_strategy", "parse_strategy", "replica_plans"]

ENGINE = "engine"  # the device / process the engine runs on
STAGES = ("text_encoder", "dit", "cache_pass", "decoder", "transport_encoder")
_PROCESSES = ("engine", "daemon")
_STREAMS = ("default", "own")
_MAX_REPLICAS = 8
_STAGE_WORDS = {"text_encoder": "the text encoder", "dit": "the DiT steps", "cache_pass": "the cache pass",
                "decoder": "the decoder", "transport_encoder": "the transport's encoder"}


class StrategyError(ServeConfigError):
    """A strategy that cannot run as written; `field` is its dotted path (strategy.stages.decoder.device)."""

    def __init__(self, path: str, message: str) -> None:
        ValueError.__init__(self, f"{path}: {message}")
        self.option = "strategy"
        self.field = path


@dataclass(frozen=True)
class StageSpec:
    process: str = "engine"
    device: str = ENGINE
    stream: str = "default"
    threads: int | None = None


@dataclass(frozen=True)
class EngineSpec:
    device: str = ENGINE
    replicas: int = 1
    memory_fractions: tuple[float, ...] = (1.0,)


def _default_stages() -> dict[str, StageSpec]:
    stages = {name: StageSpec() for name in STAGES}
    stages["transport_encoder"] = StageSpec(process="daemon", device="cpu")
    return stages


@dataclass(frozen=True)
class Strategy:
    name: str = "default"
    path: str | None = None  # the file it came from; None: the built-in default
    description: str = ""
    engine: EngineSpec = field(default_factory=EngineSpec)
    stages: Mapping[str, StageSpec] = field(default_factory=_default_stages)

    @classmethod
    def default(cls) -> Strategy:
        return cls()

    @property
    def decoder(self) -> StageSpec:
        return self.stages["decoder"]

    def decoder_mode(self) -> str:
        """The engine's decoder placement: inline, stream or device (engine.placement)."""
        if self.decoder.device != ENGINE:
            return "device"
        return "stream" if self.decoder.stream == "own" else "inline"

    def describe(self, engine_device: str) -> dict[str, Any]:
        """For /v1/capacity: the name, the file and where each stage runs."""
        stages = {}
        for name, spec in self.stages.items():
            device = engine_device if spec.device == ENGINE else spec.device
            placed: dict[str, Any] = {"process": spec.process, "device": device, "stream": spec.stream}
            if spec.threads is not None:
                placed["threads"] = spec.threads
            stages[name] = placed
        return {"name": self.name, "path": self.path, "description": self.description,
                "engine": {"device": engine_device, "replicas": self.engine.replicas,
                           "memory_fractions": list(self.engine.memory_fractions)},
                "stages": stages}


@dataclass(frozen=True)
class ReplicaPlan:
    """What one engine replica is built with."""

    index: int
    device: str | None  # None: serve's --device (or its default)
    kv_budget_bytes: int | None  # None: the engine's own default, as without a strategy
    decoder_mode: str  # inline | stream | device
    decoder_device: str | None
    decoder_threads: int | None
    own_stream: bool = False  # on a GPU: the replica's engine thread works on a CUDA stream of its own


@dataclass(frozen=True)
class MachineFacts:
    """What `check_machine` needs to know of the machine and the model (gathered by the caller)."""

    engine_device: str  # the engine's device, resolved (cpu, cuda, cuda:0)
    gpus: int
    gpu_bytes: Mapping[int, int]  # total memory per GPU index
    kv_budget_bytes: int | None  # --kv-budget-bytes
    session_kv_bytes: int  # one session's KV on the engine's device
    default_kv_bytes: int | None  # the engine's KV budget without --kv-budget-bytes (CPU), None where it is measured


# ---- parsing ---------------------------------------------------------------------------------
def load_strategy(path: str) -> Strategy:
    """Read and parse a strategy file (.toml or .json)."""
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise StrategyError("strategy", f"cannot read {path}: {exc.strerror}") from exc
    if file.suffix == ".toml":
        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise StrategyError("strategy", f"{path} is not valid TOML: {exc}") from exc
    elif file.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StrategyError("strategy", f"{path} is not valid JSON: {exc}") from exc
    else:
        raise StrategyError("strategy", f"{path}: a strategy file ends in .toml or .json")
    return parse_strategy(data, path=path)


def _table(value: Any, path: str, known: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StrategyError(path, f"must be a table of {', '.join(known)}, got {value!r}")
    for key in value:
        if key not in known:
            raise StrategyError(f"{path}.{key}", f"unknown key; valid keys: {', '.join(known)}")
    return value


def _choice(value: Any, path: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise StrategyError(path, f"{json.dumps(value)} is not one of {', '.join(json.dumps(c) for c in choices)}")
    return str(value)


def _device_name(value: Any, path: str) -> str:
    """ENGINE, cpu, cpu:N or cuda:N (a bare "cuda" is ambiguous here: name the index)."""
    if not isinstance(value, str):
        raise StrategyError(path, f"must be a device name (\"engine\", \"cpu\", \"cpu:N\", \"cuda:N\"), got {value!r}")
    kind, sep, index = value.partition(":")
    if value == ENGINE or (kind in ("cpu", "cuda") and sep and index.isdigit()) or value == "cpu":
        return value
    raise StrategyError(path, f"{json.dumps(value)} is not a device; use \"engine\", \"cpu\", \"cpu:N\" or \"cuda:N\"")


def _positive_int(value: Any, path: str, top: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1 or (top is not None and value > top):
        bound = f"1..{top}" if top is not None else ">= 1"
        raise StrategyError(path, f"must be an integer {bound}, got {value!r}")
    return value


def _stage(name: str, value: Any) -> StageSpec:
    path = f"strategy.stages.{name}"
    raw = _table(value, path, ("process", "device", "stream", "threads"))
    default = _default_stages()[name]
    process = _choice(raw.get("process", default.process), f"{path}.process", _PROCESSES)
    device = _device_name(raw.get("device", default.device), f"{path}.device")
    stream = _choice(raw.get("stream", default.stream), f"{path}.stream", _STREAMS)
    threads = _positive_int(raw["threads"], f"{path}.threads", 64) if "threads" in raw else None
    words = _STAGE_WORDS[name]
    if name == "transport_encoder":
        if process != "daemon":
            raise StrategyError(f"{path}.process", f"{json.dumps(process)}: {words} runs in the daemon's packing "
                                "threads (\"daemon\"); moving it is not implemented")
        if device != "cpu":
            raise StrategyError(f"{path}.device", f"{json.dumps(device)}: {words} runs on the CPU (\"cpu\"); a GPU "
                                "encoder is not implemented")
    elif process != "engine":
        raise StrategyError(f"{path}.process", f"{json.dumps(process)}: {words} run(s) in the engine's process "
                            "(\"engine\"); a stage in a process of its own is not implemented")
    if name in ("text_encoder", "dit", "cache_pass"):
        if device != ENGINE:
            raise StrategyError(f"{path}.device", f"{json.dumps(device)}: {words} run(s) on the engine's device "
                                "(\"engine\"; set the device in [engine]); placing it apart is not implemented")
        if stream != "default":
            raise StrategyError(f"{path}.stream", f"\"own\": {words} run(s) on the engine's stream; only the "
                                "decoder has a stream of its own")
    if name == "decoder":
        if stream == "own" and device != ENGINE:
            raise StrategyError(f"{path}.stream", f"\"own\" with device {json.dumps(device)}: a decoder on a device "
                                "of its own already runs apart; leave stream \"default\"")
        if threads is not None and not device.startswith("cpu"):
            raise StrategyError(f"{path}.threads", "only a decoder on a CPU device of its own (\"cpu:N\") has "
                                "threads of its own")
    elif threads is not None:
        raise StrategyError(f"{path}.threads", f"only the decoder has threads of its own, not {words}")
    elif stream == "own":
        raise StrategyError(f"{path}.stream", f"\"own\": only the decoder has a stream of its own, not {words}")
    return StageSpec(process, device, stream, threads)


def _engine(value: Any) -> EngineSpec:
    path = "strategy.engine"
    raw = _table(value, path, ("device", "replicas", "memory_fractions"))
    device = _device_name(raw.get("device", ENGINE), f"{path}.device")
    if device.startswith("cpu:"):
        raise StrategyError(f"{path}.device", f"{json.dumps(device)}: the engine runs on \"cpu\"; a second CPU "
                            "\"device\" is for the decoder")
    replicas = _positive_int(raw.get("replicas", 1), f"{path}.replicas", _MAX_REPLICAS)
    fractions_raw = raw.get("memory_fractions", [1.0 / replicas] * replicas)
    if not isinstance(fractions_raw, list):
        raise StrategyError(f"{path}.memory_fractions", f"must be a list of shares in (0, 1], got {fractions_raw!r}")
    if len(fractions_raw) != replicas:
        raise StrategyError(f"{path}.memory_fractions", f"{len(fractions_raw)} share(s) for {replicas} replica(s); "
                            "give one per replica")
    fractions = []
    for i, share in enumerate(fractions_raw):
        if not isinstance(share, int | float) or isinstance(share, bool) or not 0 < share <= 1:
            raise StrategyError(f"{path}.memory_fractions[{i}]", f"must be a share in (0, 1], got {share!r}")
        fractions.append(float(share))
    total = math.fsum(fractions)
    if total > 1 + 1e-9:
        raise StrategyError(f"{path}.memory_fractions", f"the replicas' shares add up to {total:g} of one device; "
                            "at most 1")
    return EngineSpec(device, replicas, tuple(fractions))


def parse_strategy(data: Any, *, path: str | None = None) -> Strategy:
    raw = _table(data, "strategy", ("name", "description", "engine", "stages"))
    name = raw.get("name", Path(path).stem if path else "unnamed")
    if not isinstance(name, str) or not name:
        raise StrategyError("strategy.name", f"must be a non-empty string, got {name!r}")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise StrategyError("strategy.description", f"must be a string, got {description!r}")
    engine = _engine(raw.get("engine", {}))
    stages = _default_stages()
    for stage, value in _table(raw.get("stages", {}), "strategy.stages", STAGES).items():
        stages[stage] = _stage(stage, value)
    return Strategy(name, path, description, engine, stages)


# ---- the machine -------------------------------------------------------------------------------
def _gpu_index(device: str) -> int | None:
    kind, _, index = device.partition(":")
    if kind != "cuda":
        return None
    return int(index) if index else 0


def check_machine(strategy: Strategy, facts: MachineFacts) -> None:
    """Refuse, naming the field, what this machine cannot run; called before anything starts."""
    engine_device = facts.engine_device
    named = [("strategy.engine.device", engine_device)]
    decoder = strategy.decoder
    if decoder.device != ENGINE:
        named.append(("strategy.stages.decoder.device", decoder.device))
    for path, device in named:
        index = _gpu_index(device)
        if index is not None and index >= facts.gpus:
            have = f"{facts.gpus} GPU" + ("" if facts.gpus == 1 else "s")
            raise StrategyError(path, f"{json.dumps(device)} but this machine has {have}")
    if decoder.device != ENGINE and _same_device(decoder.device, engine_device):
        raise StrategyError("strategy.stages.decoder.device", f"{json.dumps(decoder.device)} is the engine's own "
                            "device; say \"engine\" (with stream \"own\" for a stream of its own)")
    spec = strategy.engine
    if spec.replicas == 1 and spec.memory_fractions == (1.0,):
        return  # the engine's own budget, as without a strategy
    budget = facts.kv_budget_bytes if facts.kv_budget_bytes is not None else facts.default_kv_bytes
    if budget is None:
        raise StrategyError("strategy.engine.memory_fractions", f"on {engine_device} the shares are of "
                            "--kv-budget-bytes, the KV budget to split between the replicas; give it")
    for i, share in enumerate(spec.memory_fractions):
        replica_bytes = int(share * budget)
        if replica_bytes < facts.session_kv_bytes:
            raise StrategyError(f"strategy.engine.memory_fractions[{i}]", f"{share:g} of the KV budget {budget} "
                                f"is {replica_bytes} bytes and holds no session; one needs {facts.session_kv_bytes}")
    index = _gpu_index(engine_device)
    if index is not None and index in facts.gpu_bytes:
        kv_total = sum(int(share * budget) for share in spec.memory_fractions)
        if kv_total > facts.gpu_bytes[index]:
            raise StrategyError("strategy.engine.memory_fractions", f"the replicas' KV ({kv_total / 2**30:.1f} GiB) "
                                f"exceeds {engine_device}'s {facts.gpu_bytes[index] / 2**30:.1f} GiB")


def _same_device(a: str, b: str) -> bool:
    norm = {"cuda": "cuda:0", "cpu:0": "cpu"}
    return norm.get(a, a) == norm.get(b, b)


def replica_plans(strategy: Strategy, facts: MachineFacts | None, kv_budget_bytes: int | None) -> list[ReplicaPlan]:
    """One plan per replica: its device, KV budget and decoder placement (run `check_machine` first).
    `facts` gives the budget the shares are of when --kv-budget-bytes is not given."""
    spec = strategy.engine
    device = None if spec.device == ENGINE else spec.device
    decoder = strategy.decoder
    mode = strategy.decoder_mode()
    plans = []
    whole = spec.replicas == 1 and spec.memory_fractions == (1.0,)
    budget = kv_budget_bytes if kv_budget_bytes is not None else (facts.default_kv_bytes if facts else None)
    for i, share in enumerate(spec.memory_fractions):
        replica_budget = kv_budget_bytes if whole or budget is None else int(share * budget)
        plans.append(ReplicaPlan(i, device, replica_budget, mode, decoder.device if mode == "device" else None,
                                 decoder.threads, own_stream=spec.replicas > 1))
    return plans
