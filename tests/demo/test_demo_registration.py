"""The demo family adds itself to a model catalog explicitly: its decoder kind and its configs."""

from __future__ import annotations

import pytest
import torch

from demo.autoencoder import DemoDecoder
from demo.config import CONFIG, FINE_CONFIG
from demo.registration import catalog_with_demo, register_demo
from engine.catalog import core_catalog
from engine.errors import ConfigError


def test_register_demo_adds_its_decoder_and_both_configs() -> None:
    catalog = core_catalog()
    register_demo(catalog)
    assert catalog.names() == [
        "demo", "demo-fine", "tiny", "wan-1.3b", "wan-1.3b-preview", "wan-1.3b-world", "wan-1.3b-world-preview",
    ]
    assert catalog.decoder_kinds() == ["demo_ae", "taehv", "tiny", "wan_vae"]
    assert (catalog.config("demo"), catalog.config("demo-fine")) == (CONFIG, FINE_CONFIG)
    assert isinstance(catalog.build_decoder(CONFIG, torch.device("cpu"), torch.float32), DemoDecoder)


def test_the_core_catalog_knows_nothing_of_the_demo() -> None:
    with pytest.raises(ConfigError) as info:
        core_catalog().config("demo")
    assert info.value.code == "unknown_model"


def test_registering_twice_is_refused() -> None:
    catalog = catalog_with_demo()
    with pytest.raises(ConfigError) as info:
        register_demo(catalog)
    assert info.value.code == "duplicate_decoder"
