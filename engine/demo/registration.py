"""The demo family's entries in a model catalog: its decoder kind and its configs."""

from __future__ import annotations

from engine.catalog import ModelCatalog, core_catalog
from engine.demo.autoencoder import DemoDecoder, build_demo_decoder
from engine.demo.config import MODELS

__all__ = ["catalog_with_demo", "register_demo"]


def register_demo(catalog: ModelCatalog) -> None:
    """Add the demo decoder and the demo configs (`demo`, `demo-fine`) to `catalog`."""
    catalog.add_decoder(DemoDecoder.kind, build_demo_decoder)
    for config in MODELS.values():
        catalog.add_config(config)


def catalog_with_demo() -> ModelCatalog:
    """A new catalog of the core's models and the demo's."""
    catalog = core_catalog()
    register_demo(catalog)
    return catalog
