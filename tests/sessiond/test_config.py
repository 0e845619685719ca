"""ServeConfig: defaults, JSON file, flags over file, and errors naming the option to change."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest

from sessiond.api.server import config_from_args
from sessiond.cli import build_parser
from sessiond.config import ServeConfig
from sessiond.errors import ServeConfigError


def test_defaults_match_the_protocol_limits() -> None:
    c = ServeConfig()
    assert (c.max_message_bytes, c.max_actions_per_s, c.max_prompt_chars, c.lead_chunks) == (65536, 240, 2000, None)
    assert (c.model, c.host, c.port, c.redis_url) == ("demo", "127.0.0.1", 8000, None)
    assert c.window_frames(16) == 16 and c.window_frames(30) == 30


def test_flags_override_the_json_file(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"port": 9001, "lead-chunks": 3, "idle_offload_s": 5, "webrtc_hosts": ["127.0.0.1"]}))
    args = build_parser().parse_args(["serve", "--config", str(path), "--port", "9002", "--model", "tiny",
                                      "--log-json"])
    c = config_from_args(args)
    assert (c.port, c.lead_chunks, c.idle_offload_s, c.model, c.log_json) == (9002, 3, 5, "tiny", True)
    assert c.webrtc_hosts == ("127.0.0.1",)


def test_an_unknown_option_is_named_with_the_valid_ones() -> None:
    with pytest.raises(ServeConfigError, match=r"config option `lead`: unknown option; valid options: .*lead_chunks"):
        ServeConfig.from_mapping({"lead": 2})


@pytest.mark.parametrize(("options", "name"), [
    ({"lead_chunks": 0}, "lead_chunks"),
    ({"lead_chunks": "1"}, "lead_chunks"),
    ({"max_batch": 1.5}, "max_batch"),
    ({"port": 70000}, "port"),
    ({"idle_offload_s": 10, "idle_close_s": 5}, "idle_close_s"),
    ({"max_message_bytes": True}, "max_message_bytes"),
    ({"attention": "flash3"}, "attention"),
])
def test_bad_values_fail_at_construction_naming_the_option(options: dict[str, object], name: str) -> None:
    with pytest.raises(ServeConfigError) as info:
        ServeConfig.from_mapping(options)
    assert info.value.option == name


def test_a_config_file_that_is_not_json_says_so(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text("{port: 1")
    with pytest.raises(ServeConfigError, match="is not valid JSON"):
        config_from_args(argparse.Namespace(config=str(path)))
    with pytest.raises(ServeConfigError, match="cannot read"):
        config_from_args(argparse.Namespace(config=str(tmp_path / "missing.json")))


def test_the_engine_gets_half_the_cores_on_cpu_unless_told_otherwise() -> None:
    assert [ServeConfig().engine_threads("cpu", cores) for cores in (1, 2, 3, 4, 8, 16)] == [1, 1, 1, 2, 4, 4]
    assert ServeConfig().engine_threads("cuda:0") is None
    c = config_from_args(build_parser().parse_args(["serve", "--cpu-threads", "2"]))
    assert (c.cpu_threads, c.engine_threads("cpu"), c.engine_threads("cuda")) == (2, 2, 2)


def test_a_non_positive_cpu_thread_count_names_the_option() -> None:
    with pytest.raises(ServeConfigError) as caught:
        ServeConfig.from_mapping({"cpu_threads": 0})
    assert "cpu_threads" in str(caught.value) and "positive integer" in str(caught.value)


@pytest.mark.slow
def test_serve_builds_the_engine_with_the_attention_asked_for() -> None:
    from sessiond.runtime.engine_factory import build_engine

    config = config_from_args(build_parser().parse_args(["serve", "--model", "tiny", "--device", "cpu",
                                                         "--attention", "matmul"]))
    assert (config.attention, ServeConfig().attention) == ("matmul", "auto")
    built = build_engine(dataclasses.replace(config, kv_budget_bytes=1 << 20))
    assert built.engine.info.attention == "matmul"


@pytest.mark.slow
def test_serve_builds_the_cpu_engine_with_the_configured_threads() -> None:
    import torch

    from sessiond.runtime.engine_factory import build_engine

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        built = build_engine(ServeConfig(model="tiny", device="cpu", kv_budget_bytes=1 << 20))
        assert (built.model, torch.get_num_threads()) == ("tiny", 1)
    finally:
        torch.set_num_threads(before)


def test_cors_origins_come_from_a_comma_list_and_must_be_bare_origins() -> None:
    args = build_parser().parse_args(["serve", "--cors-origins", "http://gw:8000,https://a.example"])
    assert config_from_args(args).cors_origins == ("http://gw:8000", "https://a.example")
    with pytest.raises(ServeConfigError) as err:
        ServeConfig.from_mapping({"cors_origins": "http://gw:8000/path"})
    assert err.value.option == "cors_origins"


def test_the_world_lead_follows_the_measured_chunks_unless_fixed() -> None:
    assert ServeConfig().fixed_lead is False
    c = config_from_args(build_parser().parse_args(["serve", "--fixed-lead", "--lead-chunks", "1.5"]))
    assert (c.fixed_lead, c.lead_chunks) == (True, 1.5)
    assert config_from_args(build_parser().parse_args(["serve"])).fixed_lead is False
