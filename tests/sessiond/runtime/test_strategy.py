"""The execution strategy: parsing (each bad field refused with a message naming it), the machine
check (devices present, per-device memory shares), the replicas' plans, and the shipped examples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessiond.runtime.strategy import (
    ENGINE,
    MachineFacts,
    ReplicaPlan,
    StageSpec,
    Strategy,
    StrategyError,
    check_machine,
    load_strategy,
    parse_strategy,
    replica_plans,
)

ROOT = Path(__file__).resolve().parents[3]
SESSION = 1000  # bytes of KV per session in these facts

BAD: list[tuple[Any, str]] = [
    ({"nmae": "x"}, "strategy.nmae: unknown key; valid keys: name, description, engine, stages"),
    ({"name": ""}, "strategy.name: must be a non-empty string, got ''"),
    ({"description": 3}, "strategy.description: must be a string, got 3"),
    ({"engine": {"replica": 2}}, "strategy.engine.replica: unknown key; valid keys: device, replicas, memory_fractions"),
    ({"engine": {"replicas": 0}}, "strategy.engine.replicas: must be an integer 1..8, got 0"),
    ({"engine": {"replicas": 9}}, "strategy.engine.replicas: must be an integer 1..8, got 9"),
    ({"engine": {"replicas": True}}, "strategy.engine.replicas: must be an integer 1..8, got True"),
    ({"engine": {"replicas": 2, "memory_fractions": [0.5]}},
     "strategy.engine.memory_fractions: 1 share(s) for 2 replica(s); give one per replica"),
    ({"engine": {"replicas": 2, "memory_fractions": [0.7, 0.5]}},
     "strategy.engine.memory_fractions: the replicas' shares add up to 1.2 of one device; at most 1"),
    ({"engine": {"replicas": 2, "memory_fractions": [0.5, 0]}},
     "strategy.engine.memory_fractions[1]: must be a share in (0, 1], got 0"),
    ({"engine": {"memory_fractions": 1.0}}, "strategy.engine.memory_fractions: must be a list of shares in (0, 1], got 1.0"),
    ({"engine": {"device": "gpu0"}},
     'strategy.engine.device: "gpu0" is not a device; use "engine", "cpu", "cpu:N" or "cuda:N"'),
    ({"engine": {"device": "cpu:1"}},
     'strategy.engine.device: "cpu:1": the engine runs on "cpu"; a second CPU "device" is for the decoder'),
    ({"stages": {"vocoder": {}}},
     "strategy.stages.vocoder: unknown key; valid keys: text_encoder, dit, cache_pass, decoder, transport_encoder"),
    ({"stages": {"decoder": {"devcie": "cpu:1"}}},
     "strategy.stages.decoder.devcie: unknown key; valid keys: process, device, stream, threads"),
    ({"stages": {"decoder": "cpu:1"}},
     "strategy.stages.decoder: must be a table of process, device, stream, threads, got 'cpu:1'"),
    ({"stages": {"decoder": {"device": 1}}},
     'strategy.stages.decoder.device: must be a device name ("engine", "cpu", "cpu:N", "cuda:N"), got 1'),
    ({"stages": {"decoder": {"stream": "side"}}}, 'strategy.stages.decoder.stream: "side" is not one of "default", "own"'),
    ({"stages": {"decoder": {"process": "own"}}},
     'strategy.stages.decoder.process: "own" is not one of "engine", "daemon"'),
    ({"stages": {"decoder": {"process": "daemon"}}},
     'strategy.stages.decoder.process: "daemon": the decoder run(s) in the engine\'s process ("engine"); '
     "a stage in a process of its own is not implemented"),
    ({"stages": {"decoder": {"device": "cuda:1", "stream": "own"}}},
     'strategy.stages.decoder.stream: "own" with device "cuda:1": a decoder on a device of its own already runs '
     'apart; leave stream "default"'),
    ({"stages": {"decoder": {"device": "cuda:1", "threads": 2}}},
     'strategy.stages.decoder.threads: only a decoder on a CPU device of its own ("cpu:N") has threads of its own'),
    ({"stages": {"decoder": {"device": "cpu:1", "threads": 0}}},
     "strategy.stages.decoder.threads: must be an integer 1..64, got 0"),
    ({"stages": {"text_encoder": {"device": "cuda:1"}}},
     'strategy.stages.text_encoder.device: "cuda:1": the text encoder run(s) on the engine\'s device ("engine"; '
     "set the device in [engine]); placing it apart is not implemented"),
    ({"stages": {"dit": {"stream": "own"}}},
     'strategy.stages.dit.stream: "own": the DiT steps run(s) on the engine\'s stream; only the decoder has a '
     "stream of its own"),
    ({"stages": {"cache_pass": {"threads": 1}}},
     "strategy.stages.cache_pass.threads: only the decoder has threads of its own, not the cache pass"),
    ({"stages": {"transport_encoder": {"process": "engine"}}},
     'strategy.stages.transport_encoder.process: "engine": the transport\'s encoder runs in the daemon\'s packing '
     'threads ("daemon"); moving it is not implemented'),
    ({"stages": {"transport_encoder": {"device": "cuda:0"}}},
     'strategy.stages.transport_encoder.device: "cuda:0": the transport\'s encoder runs on the CPU ("cpu"); a GPU '
     "encoder is not implemented"),
    ({"stages": {"transport_encoder": {"stream": "own"}}},
     'strategy.stages.transport_encoder.stream: "own": only the decoder has a stream of its own, not the '
     "transport's encoder"),
    ([1, 2], "strategy: must be a table of name, description, engine, stages, got [1, 2]"),
]


@pytest.mark.parametrize(("data", "message"), BAD)
def test_a_bad_field_is_refused_naming_it(data: Any, message: str) -> None:
    with pytest.raises(StrategyError) as info:
        parse_strategy(data)
    assert str(info.value) == message
    assert info.value.field == message.split(":")[0]


def test_an_empty_strategy_is_the_default() -> None:
    parsed = parse_strategy({}, path="x.toml")
    assert (parsed.name, parsed.engine, dict(parsed.stages)) == ("x", Strategy.default().engine,
                                                                 dict(Strategy.default().stages))
    assert parsed.decoder_mode() == "inline"


def test_the_shipped_examples_parse_to_what_they_say() -> None:
    default = load_strategy(str(ROOT / "strategies" / "default.toml"))
    assert (default.engine, dict(default.stages)) == (Strategy.default().engine, dict(Strategy.default().stages))
    stream = load_strategy(str(ROOT / "strategies" / "decoder-stream.toml"))
    assert (stream.name, stream.decoder_mode(), stream.decoder) == ("decoder-stream", "stream",
                                                                     StageSpec("engine", ENGINE, "own"))
    device = load_strategy(str(ROOT / "strategies" / "decoder-device.toml"))
    assert (device.decoder_mode(), device.decoder) == ("device", StageSpec("engine", "cpu:1", "default", 1))
    replicas = load_strategy(str(ROOT / "strategies" / "two-replicas.toml"))
    assert (replicas.engine.replicas, replicas.engine.memory_fractions) == (2, (0.5, 0.5))


def test_json_is_read_like_toml(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"name": "j", "engine": {"replicas": 2}}))
    parsed = load_strategy(str(path))
    assert (parsed.name, parsed.engine.memory_fractions) == ("j", (0.5, 0.5))


@pytest.mark.parametrize(("name", "text", "message"), [
    ("s.yaml", "name: x", "strategy: {path}: a strategy file ends in .toml or .json"),
    ("s.toml", "name = ", "strategy: {path} is not valid TOML: "),
    ("s.json", "{", "strategy: {path} is not valid JSON: "),
])
def test_an_unreadable_file_is_refused(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(StrategyError) as info:
        load_strategy(str(path))
    assert str(info.value).startswith(message.format(path=path))


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StrategyError) as info:
        load_strategy(str(tmp_path / "none.toml"))
    assert str(info.value) == f"strategy: cannot read {tmp_path / 'none.toml'}: No such file or directory"


def _facts(device: str = "cpu", gpus: int = 0, kv: int | None = None, default: int | None = 16 * SESSION,
           gpu_bytes: int = 0) -> MachineFacts:
    return MachineFacts(device, gpus, {i: gpu_bytes for i in range(gpus)}, kv, SESSION, default)


MACHINE: list[tuple[Any, MachineFacts, str]] = [
    ({"stages": {"decoder": {"device": "cuda:7"}}}, _facts("cuda:0", 1, kv=10**9, default=None),
     'strategy.stages.decoder.device: "cuda:7" but this machine has 1 GPU'),
    ({"stages": {"decoder": {"device": "cuda:1"}}}, _facts(),
     'strategy.stages.decoder.device: "cuda:1" but this machine has 0 GPUs'),
    ({"engine": {"device": "cuda:2"}}, _facts("cuda:2", 2, kv=10**9, default=None),
     'strategy.engine.device: "cuda:2" but this machine has 2 GPUs'),
    ({"stages": {"decoder": {"device": "cpu"}}}, _facts(),
     'strategy.stages.decoder.device: "cpu" is the engine\'s own device; say "engine" (with stream "own" for a '
     "stream of its own)"),
    ({"engine": {"replicas": 2}}, _facts("cuda:0", 1, default=None),
     "strategy.engine.memory_fractions: on cuda:0 the shares are of --kv-budget-bytes, the KV budget to split "
     "between the replicas; give it"),
    ({"engine": {"replicas": 2, "memory_fractions": [0.95, 0.05]}}, _facts(),
     "strategy.engine.memory_fractions[1]: 0.05 of the KV budget 16000 is 800 bytes and holds no session; one "
     "needs 1000"),
    ({"engine": {"replicas": 2}}, _facts("cuda:0", 1, kv=3 << 30, default=None, gpu_bytes=2 << 30),
     "strategy.engine.memory_fractions: the replicas' KV (3.0 GiB) exceeds cuda:0's 2.0 GiB"),
]


@pytest.mark.parametrize(("data", "facts", "message"), MACHINE)
def test_what_the_machine_cannot_run_is_refused_before_start(data: Any, facts: MachineFacts, message: str) -> None:
    with pytest.raises(StrategyError) as info:
        check_machine(parse_strategy(data), facts)
    assert str(info.value) == message


def test_what_fits_passes_and_each_replica_gets_its_share() -> None:
    strategy = parse_strategy({"engine": {"replicas": 2, "memory_fractions": [0.25, 0.75]},
                               "stages": {"decoder": {"device": "cpu:1", "threads": 1}}})
    facts = _facts()
    check_machine(strategy, facts)
    assert replica_plans(strategy, facts, None) == [
        ReplicaPlan(0, None, 4 * SESSION, "device", "cpu:1", 1, own_stream=True),
        ReplicaPlan(1, None, 12 * SESSION, "device", "cpu:1", 1, own_stream=True),
    ]
    assert replica_plans(strategy, facts, 8000)[1].kv_budget_bytes == 6000  # --kv-budget-bytes is what is split


def test_one_whole_replica_keeps_the_engines_own_budget() -> None:
    strategy = parse_strategy({"stages": {"decoder": {"stream": "own"}}})
    check_machine(strategy, _facts("cuda:0", 1, default=None))  # no --kv-budget-bytes needed
    assert replica_plans(strategy, None, None) == [ReplicaPlan(0, None, None, "stream", None, None)]


def test_the_capacity_report_names_each_stage_placement() -> None:
    report = parse_strategy({"name": "d", "stages": {"decoder": {"device": "cpu:1", "threads": 1}}},
                            path="d.toml").describe("cpu")
    assert (report["name"], report["path"]) == ("d", "d.toml")
    assert report["stages"]["decoder"] == {"process": "engine", "device": "cpu:1", "stream": "default", "threads": 1}
    assert report["stages"]["dit"] == {"process": "engine", "device": "cpu", "stream": "default"}
    assert report["stages"]["transport_encoder"] == {"process": "daemon", "device": "cpu", "stream": "default"}
    assert report["engine"] == {"device": "cpu", "replicas": 1, "memory_fractions": [1.0]}
