"""The demo autoencoder: 8x spatial, one latent frame per video frame, the engine's demo_ae decoder."""

from __future__ import annotations

import pytest
import torch

from demo.autoencoder import DemoCache, DemoDecoder, DemoEncoder, build_demo_decoder
from demo.config import AE_CONFIG, CONFIG
from engine.errors import ConfigError


def test_the_encoder_compresses_8x_spatially_into_the_configured_channels() -> None:
    z = DemoEncoder(AE_CONFIG)(torch.zeros(2, 3, 128, 128))
    assert z.shape == (2, CONFIG.in_dim, 16, 16)


def test_the_engine_builds_the_demo_decoder_for_kind_demo_ae() -> None:
    decoder = build_demo_decoder(CONFIG, torch.device("cpu"), torch.float32)
    assert isinstance(decoder, DemoDecoder)
    assert decoder.kind == "demo_ae"


@torch.no_grad()
def test_on_a_cpu_the_engine_decoder_runs_channels_last_and_decodes_what_the_plain_layout_does() -> None:
    plain = DemoDecoder(AE_CONFIG).to(torch.bfloat16).eval()
    served = build_demo_decoder(CONFIG, torch.device("cpu"), torch.bfloat16)
    served.load_state_dict(plain.state_dict())
    assert served.conv_in.weight.is_contiguous(memory_format=torch.channels_last)
    assert served.up3.weight.is_contiguous(memory_format=torch.channels_last)  # kept through the load
    z = torch.randn(2, 8, 4, 16, 16, generator=torch.Generator().manual_seed(1))
    fast, caches = served.decode(z, [None, DemoCache(4)])
    slow, _ = plain.decode(z, [None, DemoCache(4)])
    assert fast.shape == slow.shape == (2, 4, 128, 128, 3) and fast.is_contiguous()
    assert caches == [DemoCache(4), DemoCache(8)]
    # the same sums in another order: bf16 roundings flip some uint8 values by one level, never more
    diff = (fast.int() - slow.int()).abs()
    assert int(diff.max()) <= 1
    assert float((diff > 0).float().mean()) < 0.05


@torch.no_grad()
def test_decode_gives_one_uint8_frame_per_latent_frame_and_counts_them_in_the_cache() -> None:
    decoder = DemoDecoder(AE_CONFIG).eval()
    frames, caches = decoder.decode(torch.randn(2, 8, 4, 16, 16), [None, DemoCache(8)])
    assert frames.shape == (2, 4, 128, 128, 3)
    assert frames.dtype == torch.uint8
    assert caches == [DemoCache(4), DemoCache(12)]
    assert decoder.frames_for(4, first=True) == decoder.frames_for(4, first=False) == 4
    assert decoder.is_first(None) and decoder.is_first(DemoCache(0)) and not decoder.is_first(DemoCache(4))


@torch.no_grad()
def test_decoding_a_chunk_equals_decoding_its_frames_one_by_one() -> None:
    torch.manual_seed(0)
    decoder = DemoDecoder(AE_CONFIG).eval()
    z = torch.randn(1, 8, 4, 16, 16, generator=torch.Generator().manual_seed(0))
    whole, _ = decoder.decode(z, [None])
    single = torch.cat([decoder.decode(z[:, :, i:i + 1], [None])[0] for i in range(4)], dim=1)
    # the convolutions may block a 4-frame batch differently from a single frame: float sums then
    # differ in the last bits, which can flip a uint8 rounding by one level, never more
    diff = (whole.int() - single.int()).abs()
    assert whole.shape == single.shape
    assert int(diff.max()) <= 1
    assert float((diff > 0).float().mean()) < 1e-3


def test_a_config_with_another_stride_is_refused_with_a_coded_error() -> None:
    with pytest.raises(ConfigError) as err:
        build_demo_decoder(CONFIG.with_overrides(vae_stride=(4, 8, 8)), torch.device("cpu"), torch.float32)
    assert err.value.code == "bad_config"


def test_the_fine_variant_compresses_4x_and_decodes_back_to_full_size() -> None:
    from demo.autoencoder import ae_config_for
    from demo.config import FINE_CONFIG

    cfg = ae_config_for(FINE_CONFIG)
    assert (cfg.latent_channels, cfg.downsample) == (4, 4)
    z = DemoEncoder(cfg)(torch.zeros(2, 3, 128, 128))
    assert z.shape == (2, 4, 32, 32) == (2, FINE_CONFIG.in_dim, FINE_CONFIG.latent_height, FINE_CONFIG.latent_width)
    decoder = build_demo_decoder(FINE_CONFIG, torch.device("cpu"), torch.float32)
    assert isinstance(decoder, DemoDecoder)
    frames, caches = decoder.decode(torch.randn(1, 4, 3, 32, 32), [None])
    assert frames.shape == (1, 3, 128, 128, 3) and caches == [DemoCache(3)]
    # the 4x decoder is the 8x one without its lowest stage
    deep, fine = set(DemoDecoder(AE_CONFIG).state_dict()), set(decoder.state_dict())
    assert deep - fine == {k for k in deep if k.startswith(("up1.", "res_mid."))}
    assert fine <= deep


def test_an_autoencoder_of_another_factor_is_refused_with_a_coded_error() -> None:
    from demo.autoencoder import AEConfig

    with pytest.raises(ConfigError) as err:
        AEConfig(downsample=2)
    assert err.value.code == "bad_config" and "4x or 8x" in err.value.message
    with pytest.raises(ConfigError):
        build_demo_decoder(CONFIG.with_overrides(vae_stride=(1, 2, 2), latent_height=64, latent_width=64),
                      torch.device("cpu"), torch.float32)
