"""The `demo` model: the small world model the project trains on its procedural world.

Sizing arithmetic (2-core CPU, fp32, 128x128 at 16 fps): latents 8 x 16 x 16 per frame, patch
(1, 2, 2) -> 64 tokens per frame, 4 latent frames per chunk -> 256 tokens. A chunk costs 3
denoise passes + 1 cache pass over 256 tokens attending to <= 768 (a window of 2 chunks + itself),
4 passes (5 while the first step was guided at double batch, before 2026-12-07). dim 256, 6 layers, ffn 768:
~6.1 M DiT parameters, ~1.6 GFLOP of matmuls + ~0.5 GFLOP of attention per pass -> ~33 ms per
pass on this CPU, ~170 ms per chunk, plus ~15 ms to decode 4 frames: 17.5-21 frames/s measured
for 16 fps playback. fp16 weights: 13.9 MB with the decoder and
the text table (<= 15 MB).

Context: no sink and a window of two chunks (the 8 frames before the chunk). RoPE positions are
absolute latent frames, so a sink would sit hundreds of frames away from the current chunk after
a minute, a distance never seen in training; a pure sliding window keeps every query-key
distance inside the trained range for endless sessions. The top-down world needs no memory
beyond what is on screen. The shipped weights were trained with this window (see MODEL_CARD.md).

Sampling: 3 flow-matching steps, none guided. The shipped weights give in one pass what the
sampling they were trained for gave in two: the first step guided on the actions (scale 3, which
makes held keys move the view at the world's speed; unguided, the same weights turn slower and
miss directions). That guidance was distilled into them (`demo.train_rollout --objective distill
--student-timesteps 1000,667,333`, MODEL_CARD.md "Guidance in one pass"), one pass of five less per
chunk.

Context noise: each chunk's cache pass sees its latents plus seeded noise of std 0.3 (still at
t = 0); without it the shipped weights' free rollouts collapse into flat colour within 10-25 s.
"""

from __future__ import annotations

from pathlib import Path

from demo.actions import DEMO_AXES, DEMO_KEYS
from demo.autoencoder import AEConfig
from demo.themes import PROMPT_EXAMPLES
from engine.api import ActionSpace
from engine.config import ModelConfig

__all__ = ["AE_CONFIG", "CONFIG", "DEFAULT_WEIGHTS", "FINE_CONFIG", "GUIDED_SAMPLING", "GUIDED_SCALE", "GUIDED_STEPS",
           "MODELS", "MOUSE_PIXELS_PER_UNIT", "TRAIN_CHUNKS"]

AE_CONFIG = AEConfig(latent_channels=8, downsample=8)
MOUSE_PIXELS_PER_UNIT = 24.0  # mouse px per frame that map to action feature 1.0 (the world's pan clamp)
TRAIN_CHUNKS = 6  # chunks per training sequence: the window rolls over 4 times
# the shipped weights: what the daemon loads for `demo` when given no weights
DEFAULT_WEIGHTS = Path(__file__).resolve().parents[1] / "engine" / "weights" / "demo.safetensors"

CONFIG = ModelConfig(
    name="demo",
    dim=256,
    num_heads=4,
    num_layers=6,
    ffn_dim=768,
    freq_dim=64,
    in_dim=AE_CONFIG.latent_channels,
    out_dim=AE_CONFIG.latent_channels,
    patch_size=(1, 2, 2),
    text_dim=64,
    text_len=16,
    eps=1e-6,
    rope_theta=10000.0,
    rope_max_frames=256,
    latent_height=16,
    latent_width=16,
    latent_frames_per_chunk=4,
    vae_stride=(1, AE_CONFIG.downsample, AE_CONFIG.downsample),
    fps=16,
    denoise_timesteps=(1000.0, 667.0, 333.0),  # 3 steps: measured with the guidance below, see MODEL_CARD.md
    num_train_timesteps=1000,
    timestep_shift=1.0,
    sink_chunks=0,
    window_chunks=2,
    max_rollback_chunks=2,
    action_space=ActionSpace(keys=DEMO_KEYS, mouse=True, buttons=0, axes=DEMO_AXES),
    action_hidden_dim=64,
    decoder_kind="demo_ae",
    cache_context_noise=0.3,  # measured on the shipped weights: see MODEL_CARD.md
    # no guidance pass: the weights were distilled to give the guided first step (scale 3) alone
    # (MODEL_CARD.md); 1 + 1 + 1 denoise passes + the cache pass
    action_guidance=1.0,
    action_guidance_steps=0,
    mouse_scale=1.0 / MOUSE_PIXELS_PER_UNIT,
    text_vocab_buckets=1024,
    text_cache_entries=64,
    # one chunk (4 frames, 0.25 s) of world lead: action-to-photon p50 ~290 ms in Chromium on a 2-core CPU
    # against 330-600 ms at the engine's usual 2 (MODEL_CARD.md)
    extra={"default_weights": str(DEFAULT_WEIGHTS), "prompt_examples": PROMPT_EXAMPLES, "lead_chunks": 1.0},
)

# The sampling served until 2026-12-07 (config overrides): the first of the 3 steps guided on the actions
# at scale 3, its two passes batched. The shipped weights give it in one pass; the distill objective's
# teacher and demo.cpu_trades' guided trades sample it.
GUIDED_SCALE, GUIDED_STEPS = 3.0, 1
GUIDED_SAMPLING: dict[str, object] = {"action_guidance": GUIDED_SCALE, "action_guidance_steps": GUIDED_STEPS}

# An experiment, not served: the same world model over a 4x autoencoder (latent cell 4 px, 4 channels,
# 32 x 32 latents, patch 4 x 4 -> still 64 tokens of 16 px per frame). The shipped 8x model moves in
# 4-pixel steps, half its latent cell (MODEL_CARD.md); with a 4 px cell the world's usual speed of
# ~4 px a frame is a whole-cell shift. No weights ship for it: train with
# `python -m demo.train --model demo-fine ...`.
FINE_CONFIG = CONFIG.with_overrides(
    name="demo-fine",
    in_dim=4,
    out_dim=4,
    patch_size=(1, 4, 4),
    latent_height=32,
    latent_width=32,
    vae_stride=(1, 4, 4),
    extra={},
)

MODELS: dict[str, ModelConfig] = {CONFIG.name: CONFIG, FINE_CONFIG.name: FINE_CONFIG}
