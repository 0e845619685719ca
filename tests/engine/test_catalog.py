"""The model catalog: the core's models and decoders, configs added by name, refusals that say why."""

from __future__ import annotations

import pytest
import torch

from engine.catalog import core_catalog
from engine.config import tiny_config
from engine.decoders.tiny import TinyDecoder
from engine.errors import ConfigError


def test_the_core_catalog_holds_the_core_models_and_decoders() -> None:
    catalog = core_catalog()
    assert catalog.names() == ["tiny", "wan-1.3b", "wan-1.3b-preview", "wan-1.3b-world", "wan-1.3b-world-preview"]
    assert catalog.decoder_kinds() == ["taehv", "tiny", "wan_vae"]
    assert catalog.config("tiny") == tiny_config()


def test_an_added_config_is_returned_by_name_and_stays_in_its_catalog() -> None:
    catalog = core_catalog()
    custom = tiny_config().with_overrides(name="tiny-wide", dim=64)
    catalog.add_config(custom)
    assert catalog.config("tiny-wide") is custom
    assert "tiny-wide" not in core_catalog().names()


def test_an_unknown_model_lists_the_valid_names() -> None:
    with pytest.raises(ConfigError) as info:
        core_catalog().config("wan-14b")
    assert (info.value.code, info.value.message) == (
        "unknown_model",
        "unknown model 'wan-14b'; valid names: tiny, wan-1.3b, wan-1.3b-preview, wan-1.3b-world, wan-1.3b-world-preview",
    )


def test_a_name_already_taken_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        core_catalog().add_config(tiny_config().with_overrides(dim=64))
    assert info.value.code == "duplicate_model"


def test_a_decoder_kind_already_taken_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        core_catalog().add_decoder("tiny", lambda config, device, dtype: TinyDecoder(config))
    assert info.value.code == "duplicate_decoder"


def test_a_config_with_an_unknown_decoder_kind_is_refused_when_added_and_when_built() -> None:
    config = tiny_config().with_overrides(name="tiny-vq", decoder_kind="vqgan")
    catalog = core_catalog()
    with pytest.raises(ConfigError) as added:
        catalog.add_config(config)
    with pytest.raises(ConfigError) as built:
        catalog.build_decoder(config, torch.device("cpu"), torch.float32)
    for info in (added, built):
        assert (info.value.code, info.value.message) == (
            "unknown_decoder", "model 'tiny-vq': decoder kind 'vqgan' is not one of ['taehv', 'tiny', 'wan_vae']")


def test_the_catalog_builds_the_decoder_of_the_config_kind() -> None:
    decoder = core_catalog().build_decoder(tiny_config(), torch.device("cpu"), torch.float32)
    assert isinstance(decoder, TinyDecoder) and decoder.kind == "tiny"
