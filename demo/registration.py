"""The demo family's entries in a model catalog: its decoder kind and its configs."""

from __future__ import annotations

from demo.autoencoder import DemoDecoder, build_demo_decoder
from demo.config import MODELS
from engine.catalog import ModelCatalog, core_catalog

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
