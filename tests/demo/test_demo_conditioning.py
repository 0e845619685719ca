"""Training-side conditioning matches what the engine feeds the DiT at inference."""

from __future__ import annotations

import torch

from demo.actions import action_batch
from demo.conditioning import action_features, chunked_kernels, prompt_context
from demo.config import CONFIG
from engine.actions import encode_actions
from engine.api import FrameAction
from engine.attention import AttentionBackend
from engine.model import CausalDiT

SMALL = CONFIG.with_overrides(dim=32, num_heads=2, num_layers=2, ffn_dim=32, latent_height=4, latent_width=4,
                              text_len=4, text_dim=8, action_hidden_dim=8)


def test_batched_action_features_equal_the_engines_encoding() -> None:
    actions = [FrameAction(keys=("w", "shift")), FrameAction(keys=("arrowleft",), mouse=(12.0, -30.0)),
               FrameAction(axes=(0.5, -1.0)), FrameAction(keys=("space", "d"), mouse=(-3.0, 2.0), axes=(0.1, 0.2))]
    ours = action_features(action_batch(actions), CONFIG)[0]
    engine = encode_actions(CONFIG.action_space, actions, 4, CONFIG.mouse_scale)
    assert torch.equal(ours, engine)


def _model() -> CausalDiT:
    model = CausalDiT(SMALL)
    model.init_random(5)
    return model.eval()


def _inputs(chunks: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    frames = chunks * SMALL.latent_frames_per_chunk
    x = torch.randn(1, SMALL.in_dim, frames, 4, 4, generator=gen)
    t = torch.rand(1, frames, generator=gen) * 1000
    a = torch.randn(1, frames, SMALL.action_features, generator=gen)
    return x, t, a


@torch.no_grad()
def test_one_prompt_repeated_per_chunk_equals_the_single_prompt_forward() -> None:
    model, (x, t, a) = _model(), _inputs(3)
    prompt = torch.randn(1, SMALL.text_len, SMALL.text_dim, generator=torch.Generator().manual_seed(2))
    base = AttentionBackend.create("sdpa", torch.device("cpu"))
    single = model.forward_full(x, t, a, model.embed_text(prompt), model.new_rope(torch.device("cpu")), base)
    per_chunk = prompt_context(model.embed_text(prompt.repeat(3, 1, 1)), 3)
    model.kernels = chunked_kernels(3)
    out = model.forward_full(x, t, a, per_chunk, model.new_rope(torch.device("cpu")), base)
    assert torch.allclose(out, single, rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_each_chunk_sees_only_its_own_prompt() -> None:
    model, (x, t, a) = _model(), _inputs(2)
    for name, param in model.named_parameters():  # make prompts matter a lot, so a leak would show
        if ("cross_attn" in name or "text_embedding" in name) and name.endswith("weight") and "norm" not in name:
            param.mul_(20.0)
    gen = torch.Generator().manual_seed(3)
    first, second = (torch.randn(1, SMALL.text_len, SMALL.text_dim, generator=gen) for _ in range(2))
    base = AttentionBackend.create("sdpa", torch.device("cpu"))
    rope = model.new_rope(torch.device("cpu"))
    plain = model.kernels
    model.kernels = chunked_kernels(2)
    mixed = model.forward_full(x, t, a, prompt_context(model.embed_text(torch.cat([first, second])), 2), rope, base)
    model.kernels = plain
    only_first = model.forward_full(x, t, a, model.embed_text(first), rope, base)
    only_second = model.forward_full(x, t, a, model.embed_text(second), rope, base)
    f = SMALL.latent_frames_per_chunk
    assert torch.allclose(mixed[:, :, :f], only_first[:, :, :f], rtol=1e-5, atol=1e-5)  # chunk 0: first prompt
    assert float((mixed[:, :, f:] - only_first[:, :, f:]).abs().max()) > 0.1  # chunk 1 follows the second
    assert float((mixed[:, :, f:] - only_second[:, :, f:]).abs().max()) < 0.01  # (its context saw the first)
