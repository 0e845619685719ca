"""The detail-decay probe (``python -m demo.detail_decay``): per generated chunk the world's and the
model's latent detail, deterministic, and the CLI's checks."""

from __future__ import annotations

import json
import math

import pytest
import torch

from demo._train_adversarial import detail_energy
from demo.autoencoder import AEConfig, DemoEncoder
from demo.detail_decay import DetailDecay, build_parser, detail_decay, run
from demo.errors import DemoError
from tests.demo.test_demo_train_rollout import TINY, WORLD, _model


def _probe(chunks: int = 3) -> DetailDecay:
    torch.manual_seed(0)
    encoder = DemoEncoder(AEConfig(latent_channels=8, downsample=8)).eval()
    dit, text = _model()
    return detail_decay(dit, text, encoder, TINY, WORLD, chunks=chunks, episodes=2, seed=3)


def test_one_figure_per_generated_chunk_and_the_same_figures_twice() -> None:
    first, again = _probe(), _probe()
    assert len(first.world) == len(first.model) == len(first.ratio) == 3 and first.episodes == 2
    assert first == again
    assert all(w > 0 and m > 0 for w, m in zip(first.world, first.model, strict=True))
    assert first.ratio == [m / w for m, w in zip(first.model, first.world, strict=True)]


def test_the_figure_is_the_mean_over_channels_of_the_detail_energy() -> None:
    flat_but_one = torch.zeros(1, 2, 1, 2, 2)
    flat_but_one[0, 0, 0, 0, 0] = 1.0  # channel 0: one cell differs from its two neighbours by 1
    # one of the two horizontal pairs differs by 1 (mean square 1/2), one of the two vertical ones too
    assert detail_energy(flat_but_one).tolist() == pytest.approx([math.sqrt((0.5 + 0.5) / 2), 0.0])
    assert DetailDecay([2.0, 0.0], [1.0, 1.0], 1).ratio == [0.5, 0.0]


@pytest.mark.parametrize(("flags", "code"), [(["--chunks", "0"], "bad_chunks"), (["--episodes", "0"], "bad_episodes"),
                                             (["--weights", "/nonexistent"], "resume_not_found")])
def test_the_cli_rejects_bad_settings(flags: list[str], code: str) -> None:
    with pytest.raises(DemoError) as caught:
        run(build_parser().parse_args(["--weights", "engine/weights", *flags]))
    assert caught.value.code == code


def test_the_cli_reads_the_shipped_weights_and_writes_its_figures(tmp_path: object) -> None:
    out = tmp_path / "detail.json"  # type: ignore[operator]
    found = run(build_parser().parse_args(["--weights", "engine/weights", "--chunks", "2", "--episodes", "2",
                                           "--threads", "1", "--json", str(out)]))
    saved = json.loads(out.read_text())
    assert saved["world"] == found.world and saved["model"] == found.model and saved["ratio"] == found.ratio
    assert len(found.world) == 2 and saved["episodes"] == 2
