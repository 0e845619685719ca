"""wan-1.3b: the DiT's state dict equals the Wan2.1-T2V-1.3B manifest (meta device, no memory)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from engine.config import wan_13b_config
from engine.model import ACTION_PREFIX, CausalDiT

MANIFEST = Path(__file__).resolve().parents[1] / "fixtures" / "wan2.1_t2v_1.3b_manifest.json"


def _meta_state() -> dict[str, torch.Tensor]:
    with torch.device("meta"):
        return CausalDiT(wan_13b_config()).state_dict()


def _manifest_keys() -> dict[str, dict[str, object]]:
    return dict(json.loads(MANIFEST.read_text())["dit"]["keys"])


def test_wan_keys_and_shapes_equal_the_manifest_in_order() -> None:
    ours = {k: list(v.shape) for k, v in _meta_state().items() if not k.startswith(ACTION_PREFIX)}
    manifest = {k: v["shape"] for k, v in _manifest_keys().items()}
    assert list(ours) == list(manifest)
    assert ours == manifest


def test_wan_parameter_count_equals_the_manifest() -> None:
    state = _meta_state()
    count = sum(v.numel() for k, v in state.items() if not k.startswith(ACTION_PREFIX))
    assert count == json.loads(MANIFEST.read_text())["dit"]["num_params"] == 1_418_996_800


def test_action_parameters_are_the_only_extra_keys_and_are_prefixed() -> None:
    extra = sorted(set(_meta_state()) - set(_manifest_keys()))
    assert extra == [
        "action_embedding.0.bias", "action_embedding.0.weight", "action_embedding.2.bias", "action_embedding.2.weight",
    ]


def test_wan_config_matches_the_manifest_config() -> None:
    manifest = json.loads(MANIFEST.read_text())["config"]
    c = wan_13b_config()
    assert (c.dim, c.ffn_dim, c.freq_dim, c.num_heads, c.num_layers) == (
        manifest["dim"], manifest["ffn_dim"], manifest["freq_dim"], manifest["num_heads"], manifest["num_layers"]
    )
    assert (c.in_dim, c.out_dim, c.text_dim, c.text_len, c.eps) == (
        manifest["in_dim"], manifest["out_dim"], manifest["text_dim"], manifest["text_len"], manifest["eps"]
    )
    assert list(c.patch_size) == manifest["patch_size"]
    assert (c.height, c.width, c.latent_frames_per_chunk, c.tokens_per_chunk) == (480, 832, 3, 4680)
