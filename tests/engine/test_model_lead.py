"""A model advises the world lead a daemon plays it with (ModelInfo.lead_chunks)."""

from __future__ import annotations

import pytest

from demo.config import CONFIG as DEMO
from engine._setup import _lead_chunks
from engine.catalog import core_catalog
from engine.errors import ConfigError


def test_the_demo_model_advises_one_chunk_and_the_core_models_two() -> None:
    catalog = core_catalog()
    assert _lead_chunks(DEMO) == 1.0
    assert [_lead_chunks(catalog.config(name)) for name in ("tiny", "wan-1.3b", "wan-1.3b-world")] == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("bad", [0, -1.0, "1", True])
def test_a_bad_advice_is_a_coded_error_naming_the_model(bad: object) -> None:
    config = DEMO.with_overrides(extra={**DEMO.extra, "lead_chunks": bad})
    with pytest.raises(ConfigError) as info:
        _lead_chunks(config)
    assert info.value.code == "bad_lead_chunks" and "'demo'" in info.value.message


def test_the_built_engine_reports_the_advice_in_its_info() -> None:
    from engine.engine import Engine

    engine = Engine.create(model="tiny", device="cpu", kv_budget_bytes=1 << 20)
    assert engine.info.lead_chunks == 2.0
