"""Shapes of a Wan-style VAE decoder: the official Wan2.1 VAE, a tiny one for tests, and the
choice for a model config."""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import ModelConfig
from engine.errors import ConfigError

__all__ = ["WAN21_LATENT_MEAN", "WAN21_LATENT_STD", "WanVAEConfig", "vae_config_for"]

# per-channel latent statistics of Wan2.1_VAE (manifest `vae.latent_mean` / `vae.latent_std`)
WAN21_LATENT_MEAN = (
    -0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
    0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921,
)  # fmt: skip
WAN21_LATENT_STD = (
    2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
    3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160,
)  # fmt: skip


@dataclass(frozen=True)
class WanVAEConfig:
    """Shapes of a Wan-style VAE decoder; `wan21()` is the official Wan2.1 VAE."""

    base_channels: int
    z_channels: int
    channel_multipliers: tuple[int, ...]
    res_blocks: int
    temporal_upsample: tuple[bool, ...]  # per upsampling stage, deepest first
    latent_mean: tuple[float, ...]
    latent_std: tuple[float, ...]

    def __post_init__(self) -> None:
        problems = []
        stages = len(self.channel_multipliers)
        if stages < 2:
            problems.append("channel_multipliers needs at least 2 entries")
        if len(self.temporal_upsample) != stages - 1:
            problems.append(f"temporal_upsample needs {stages - 1} entries (one per upsampling stage)")
        if len(self.latent_mean) != self.z_channels or len(self.latent_std) != self.z_channels:
            problems.append(f"latent_mean and latent_std need {self.z_channels} entries (z_channels)")
        if any(s <= 0 for s in self.latent_std):
            problems.append("latent_std entries must be > 0")
        if self.base_channels < 1 or self.base_channels * min(self.channel_multipliers, default=1) % 2:
            problems.append("base_channels * each multiplier must be even (upsampling halves channels)")
        if problems:
            raise ConfigError("bad_vae_config", "Wan VAE config: " + "; ".join(problems))

    @property
    def temporal_stride(self) -> int:
        return 2 ** sum(self.temporal_upsample)

    @property
    def spatial_stride(self) -> int:
        return 2 ** (len(self.channel_multipliers) - 1)

    @classmethod
    def wan21(cls) -> WanVAEConfig:
        """Wan2.1_VAE: dim 96, z 16, multipliers (1, 2, 4, 4), 2 res blocks, temporal (T, T, F)."""
        return cls(
            base_channels=96,
            z_channels=16,
            channel_multipliers=(1, 2, 4, 4),
            res_blocks=2,
            temporal_upsample=(True, True, False),
            latent_mean=WAN21_LATENT_MEAN,
            latent_std=WAN21_LATENT_STD,
        )

    @classmethod
    def tiny(cls, z_channels: int = 4) -> WanVAEConfig:
        """Same topology with few channels, for fast CPU tests."""
        return cls(
            base_channels=4,
            z_channels=z_channels,
            channel_multipliers=(1, 2, 4, 4),
            res_blocks=2,
            temporal_upsample=(True, True, False),
            latent_mean=tuple(0.1 * i for i in range(z_channels)),
            latent_std=tuple(1.0 + 0.25 * i for i in range(z_channels)),
        )


def vae_config_for(config: ModelConfig) -> WanVAEConfig:
    """The Wan VAE of a model config: `extra["wan_vae"]` when given, else the Wan2.1 VAE."""
    override = config.extra.get("wan_vae")
    if isinstance(override, WanVAEConfig):
        vae = override
    elif override is None:
        vae = WanVAEConfig.wan21()
    else:
        raise ConfigError("bad_vae_config", f"model {config.name!r}: extra['wan_vae'] must be a WanVAEConfig")
    strides = (vae.temporal_stride, vae.spatial_stride, vae.spatial_stride)
    if vae.z_channels != config.out_dim or strides != tuple(config.vae_stride):
        raise ConfigError(
            "bad_vae_config",
            f"model {config.name!r} has out_dim {config.out_dim} and vae_stride {tuple(config.vae_stride)}, "
            f"but its Wan VAE takes {vae.z_channels} channels with strides {strides}: set extra['wan_vae'] "
            "to a matching WanVAEConfig or use decoder_kind 'tiny'",
        )
    return vae
