"""Model configurations: every number the engine uses lives in `ModelConfig`.

The core's own: `tiny_config()` for CPU tests, `wan_13b_config()` for Wan2.1-T2V-1.3B shapes.
Configs are found by name through a `engine.catalog.ModelCatalog`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.api import ActionSpace
from engine.errors import ConfigError

__all__ = [
    "ModelConfig",
    "preview_config",
    "tiny_config",
    "wan_13b_config",
    "wan_13b_world_config",
]

_WASD_KEYS = (
    "w", "a", "s", "d", "arrowup", "arrowdown", "arrowleft", "arrowright", "space", "shift",
)


@dataclass(frozen=True)
class ModelConfig:
    """Shapes and sampling of one causal chunked world model (Wan2.1 lineage)."""

    name: str
    # transformer
    dim: int
    num_heads: int
    num_layers: int
    ffn_dim: int
    freq_dim: int
    in_dim: int  # latent channels in
    out_dim: int  # latent channels out
    patch_size: tuple[int, int, int]  # (t, h, w)
    text_dim: int
    text_len: int  # prompt tokens after padding (cross-attention length)
    eps: float
    rope_theta: float
    rope_max_frames: int  # initial RoPE table length in latent frames (grows when exceeded)
    # latent video geometry
    latent_height: int
    latent_width: int
    latent_frames_per_chunk: int
    vae_stride: tuple[int, int, int]  # (t, h, w) decoder upsampling
    fps: int
    # sampling: flow matching with shifted sigmas, one DENOISE phase per entry
    denoise_timesteps: tuple[float, ...]
    num_train_timesteps: int
    timestep_shift: float
    # session context
    sink_chunks: int
    window_chunks: int
    max_rollback_chunks: int  # undelivered chunks whose evicted KV is kept for rollback
    # conditioning
    action_space: ActionSpace
    action_hidden_dim: int
    decoder_kind: str  # a decoder kind of the model catalog the config is built from
    max_batch: int = 8  # warmup runs every batch size up to this (no first-request compile stall)
    default_kv_sessions: int = 16  # KV budget when none is given (CPU): this many sessions
    # KV budget when none is given (CUDA): this fraction of the memory left free after the decoder's
    # working set at max_batch (measured at start-up, times 1 + cuda_working_margin), shared between
    # each session's KV and its decoder cache (see engine/_memory.py)
    cuda_kv_memory_fraction: float = 0.85
    cuda_working_margin: float = 0.5  # headroom on the measured working set (DiT activations, fragmentation)
    cuda_kv_max_sessions: int = 1024  # ... but never more sessions than this (a small model would take the whole GPU)
    # a stream's first chunk is decoded in two calls, its first `first_decode_split` latent frames
    # alone (so the first frames come out sooner), then the rest; 0 = in one call. A causal
    # streaming decoder gives the same frames either way.
    first_decode_split: int = 0
    # guidance on the actions (classifier-free style): on the first `action_guidance_steps` denoise
    # steps the flow is flow(no input) + action_guidance * (flow(actions) - flow(no input)), the
    # "no input" pass being the same sessions with every key up and no mouse or axis movement;
    # 1.0 = off (one pass). It costs one more batched pass per guided step.
    action_guidance: float = 1.0
    action_guidance_steps: int = 1
    # share in [0, 1] of the guided flow rescaled to the std of the plain flow with the actions (per
    # sample, as in CFG rescale): large guidance scales overshoot (stripes) and this pulls them back
    action_guidance_rescale: float = 0.0
    # std of seeded Gaussian noise added to a chunk's clean latents for its cache pass (still at
    # t = 0, as the trainer's "clean context with a little noise"); the record keeps them clean.
    # Masks the small errors a model's own chunks carry into its context so they do not compound
    # (demo: without it, free rollouts drift into flat colour within 10-25 s). 0 = exact latents.
    cache_context_noise: float = 0.0
    # when a session's prompt changes, the first chunk begun under the new prompt first rewrites the
    # K/V of the window's chunks under it (one cache pass each, the window's chunks before it their
    # context): the context is read as made under the new prompt, not the old (Engine.begin_chunk)
    recontext_on_prompt_change: bool = False
    # guidance on a prompt change (classifier-free style, the old prompt in the place of "no
    # prompt"): the first `prompt_change_guidance_chunks` chunks begun under a new prompt take, on
    # their first `prompt_change_guidance_steps` denoise steps, flow(old prompt) + prompt_change_guidance
    # * (flow(new prompt) - flow(old prompt)), the old prompt's pass batched beside (one more row for
    # those chunks and steps only); 1.0 = off. It pushes toward the new prompt where the window, made
    # under the old one, holds the picture back. With action guidance on too, both differences add.
    prompt_change_guidance: float = 1.0
    prompt_change_guidance_chunks: int = 4
    prompt_change_guidance_steps: int = 1
    # speed options (see engine/README.md, "Levers"): CUDA graphs over whole DiT passes (exact);
    # the FFN GEMMs in FP8 (lossy); the q/k/v and cross-attention q projections in FP8 (lossy; their
    # activations quantized in the norm kernel before each GEMM); each chunk's K/V written by its
    # last denoise pass instead of a t=0 cache pass (an approximation, as StreamDiffusionV2; the
    # cache phase then only finishes)
    cuda_graphs: bool = False
    fp8_ffn: bool = False
    fp8_proj: bool = False
    kv_from_last_pass: bool = False
    mouse_scale: float = 0.01  # accumulated mouse pixels -> action feature units
    tiny_decoder_hidden: int = 32  # hidden width of the tiny decoder (decoder_kind "tiny")
    text_vocab_buckets: int = 4096  # built-in hashing text encoder
    text_cache_entries: int = 64
    extra: dict[str, object] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        problems = []
        if self.dim % self.num_heads:
            problems.append(f"dim {self.dim} is not divisible by num_heads {self.num_heads}")
        elif self.head_dim % 2 or self.head_dim < 8:
            problems.append(f"head_dim {self.head_dim} must be even and >= 8 for 3-D RoPE")
        if self.latent_height % self.patch_size[1] or self.latent_width % self.patch_size[2]:
            problems.append("latent_height/latent_width must be multiples of patch_size (h, w)")
        if self.patch_size[0] != 1:
            problems.append("patch_size[0] must be 1: modulation and actions are per latent frame")
        if not self.denoise_timesteps:
            problems.append("denoise_timesteps must name at least one step")
        if any(not 0.0 < t <= self.num_train_timesteps for t in self.denoise_timesteps):
            problems.append(f"denoise_timesteps must lie in (0, {self.num_train_timesteps}]")
        if self.action_guidance <= 0.0:
            problems.append(f"action_guidance must be > 0 (1 = none), got {self.action_guidance}")
        if self.prompt_change_guidance <= 0.0:
            problems.append(f"prompt_change_guidance must be > 0 (1 = none), got {self.prompt_change_guidance}")
        if self.prompt_change_guidance_chunks < 0:
            problems.append(f"prompt_change_guidance_chunks must be >= 0, got {self.prompt_change_guidance_chunks}")
        if not 0 <= self.prompt_change_guidance_steps <= len(self.denoise_timesteps):
            problems.append(f"prompt_change_guidance_steps must lie in [0, {len(self.denoise_timesteps)}] "
                            f"(the number of denoise steps), got {self.prompt_change_guidance_steps}")
        if self.cache_context_noise < 0.0:
            problems.append(f"cache_context_noise must be >= 0, got {self.cache_context_noise}")
        if not 0.0 <= self.action_guidance_rescale <= 1.0:
            problems.append(f"action_guidance_rescale must lie in [0, 1], got {self.action_guidance_rescale}")
        if not 0 <= self.action_guidance_steps <= len(self.denoise_timesteps):
            problems.append(f"action_guidance_steps must lie in [0, {len(self.denoise_timesteps)}] "
                            f"(the number of denoise steps), got {self.action_guidance_steps}")
        if self.sink_chunks < 0 or self.window_chunks < 1:
            problems.append("sink_chunks must be >= 0 and window_chunks >= 1")
        if self.max_rollback_chunks < 1:
            problems.append("max_rollback_chunks must be >= 1 (rollback drops at least the chunk in progress)")
        if not self.decoder_kind:
            problems.append("decoder_kind must name a decoder (a kind in the model catalog)")
        if problems:
            raise ConfigError("bad_config", f"model config {self.name!r}: " + "; ".join(problems))

    # derived geometry ------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.dim // self.num_heads

    @property
    def tokens_per_frame(self) -> int:
        """Tokens of one patchified latent frame."""
        return (self.latent_height // self.patch_size[1]) * (self.latent_width // self.patch_size[2])

    @property
    def tokens_per_chunk(self) -> int:
        return self.latent_frames_per_chunk * self.tokens_per_frame

    @property
    def context_chunks(self) -> int:
        return self.sink_chunks + self.window_chunks

    @property
    def height(self) -> int:
        return self.latent_height * self.vae_stride[1]

    @property
    def width(self) -> int:
        return self.latent_width * self.vae_stride[2]

    @property
    def frames_per_chunk(self) -> int:
        """Decoded video frames of a steady (not first) chunk."""
        return self.latent_frames_per_chunk * self.vae_stride[0]

    @property
    def action_features(self) -> int:
        """Width of one latent frame's raw action vector: keys + mouse + buttons + axes."""
        space = self.action_space
        return len(space.keys) + (2 if space.mouse else 0) + space.buttons + space.axes

    def with_overrides(self, **changes: object) -> ModelConfig:
        return replace(self, **changes)  # type: ignore[arg-type]


def tiny_config() -> ModelConfig:
    return ModelConfig(
        name="tiny",
        dim=32, num_heads=2, num_layers=2, ffn_dim=64, freq_dim=16,
        in_dim=4, out_dim=4, patch_size=(1, 2, 2), text_dim=16, text_len=8,
        eps=1e-6, rope_theta=10000.0, rope_max_frames=64,
        latent_height=4, latent_width=4, latent_frames_per_chunk=2, vae_stride=(4, 8, 8), fps=16,
        denoise_timesteps=(1000.0, 750.0, 500.0, 250.0), num_train_timesteps=1000,
        timestep_shift=5.0,
        sink_chunks=1, window_chunks=2, max_rollback_chunks=4,
        action_space=ActionSpace(keys=_WASD_KEYS, mouse=True, buttons=2, axes=2),
        action_hidden_dim=16, decoder_kind="tiny", tiny_decoder_hidden=8,
        text_vocab_buckets=512, text_cache_entries=16, max_batch=3,
    )


def wan_13b_config() -> ModelConfig:
    # numbers from the Wan2.1-T2V-1.3B config (manifest `config`), 480x832, chunk = 3 latent frames,
    # Self-Forcing's 4-step schedule (shift 5); 7 chunks = the reference's 21-frame global cache
    return ModelConfig(
        name="wan-1.3b",
        dim=1536, num_heads=12, num_layers=30, ffn_dim=8960, freq_dim=256,
        in_dim=16, out_dim=16, patch_size=(1, 2, 2), text_dim=4096, text_len=512,
        eps=1e-6, rope_theta=10000.0, rope_max_frames=1024,
        latent_height=60, latent_width=104, latent_frames_per_chunk=3, vae_stride=(4, 8, 8), fps=16,
        denoise_timesteps=(1000.0, 750.0, 500.0, 250.0), num_train_timesteps=1000,
        timestep_shift=5.0,
        sink_chunks=1, window_chunks=6, max_rollback_chunks=2,
        action_space=ActionSpace(keys=_WASD_KEYS, mouse=True, buttons=2, axes=4),
        action_hidden_dim=256, decoder_kind="wan_vae",
        first_decode_split=1,  # the first latent frame decodes to the stream's first video frame
    )


def wan_13b_world_config() -> ModelConfig:
    """wan-1.3b at the world-model geometry: sink 1 chunk + a window of 6 latent frames (2 chunks),
    Matrix-Game 2.0's local attention size; a context of 4 chunks with the current one instead of 8."""
    return wan_13b_config().with_overrides(name="wan-1.3b-world", window_chunks=2)


def preview_config(config: ModelConfig) -> ModelConfig:
    """`config` with the TAEHV-layout preview decoder instead of the Wan VAE (cheaper frames; the VAE
    stays the quality default), named `<name>-preview`."""
    return config.with_overrides(name=f"{config.name}-preview", decoder_kind="taehv")
