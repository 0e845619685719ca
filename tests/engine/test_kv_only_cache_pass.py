"""The cache pass keeps only the K/V it writes: it stops after the last block's write, and writes
exactly what the whole pass writes."""

from __future__ import annotations

import torch

from engine.api import FrameAction
from engine.model.blocks import AttnContext
from tests.engine._helpers import make_engine, run_chunk


def _writes(kv_only: bool) -> tuple[object, list[tuple[int, torch.Tensor, torch.Tensor]]]:
    engine = make_engine()
    model, c = engine.parts.model, engine.config
    gen = torch.Generator().manual_seed(5)
    latents = torch.randn(2, c.in_dim, c.latent_frames_per_chunk, c.latent_height, c.latent_width, generator=gen)
    actions = torch.randn(2, c.latent_frames_per_chunk, c.action_features, generator=gen)
    context = model.embed_text(torch.randn(2, c.text_len, c.text_dim, generator=gen))
    cos, sin = model.new_rope(torch.device("cpu")).for_frames([0, 0], c.latent_frames_per_chunk)
    written: list[tuple[int, torch.Tensor, torch.Tensor]] = []
    ctx = AttnContext(cos=cos, sin=sin, contexts=[[], []], write=lambda layer, k, v, centre: written.append((layer, k, v)))
    t = torch.zeros(2, c.latent_frames_per_chunk)
    with torch.no_grad():
        out = model(latents, t, actions, context, ctx, engine.parts.attend, None, kv_only)
    return out, written


def test_a_kv_only_pass_writes_every_layer_s_k_v_as_the_whole_pass_does_and_returns_nothing() -> None:
    out_full, full = _writes(kv_only=False)
    out_kv, kv = _writes(kv_only=True)
    assert isinstance(out_full, torch.Tensor) and out_kv is None
    assert [layer for layer, _, _ in kv] == [layer for layer, _, _ in full] == list(range(len(full)))
    for (_, k1, v1), (_, k2, v2) in zip(full, kv, strict=True):
        assert torch.equal(k1, k2) and torch.equal(v1, v2)


def test_the_cache_pass_skips_the_last_block_s_attention_and_the_head() -> None:
    engine = make_engine()
    model = engine.parts.model
    calls = {"head": 0, "last_block": 0}
    head, last = model.head, model.blocks[-1]
    head.register_forward_hook(lambda *_: calls.__setitem__("head", calls["head"] + 1))
    last.register_forward_hook(lambda *_: calls.__setitem__("last_block", calls["last_block"] + 1))
    assert engine.open_session("s", seed=1, prompt="a harbour")
    run_chunk(engine, "s", [FrameAction(keys=("w",))])
    steps = len(engine.config.denoise_timesteps)
    assert calls == {"head": steps, "last_block": steps}  # the denoise passes only: not the cache pass
