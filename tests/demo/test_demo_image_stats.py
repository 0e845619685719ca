"""The long-play evaluation's image statistics on frames whose answer is known: the avatar detector
on the true world with and without its avatar, the spectral-peak test on synthetic grids and
stripes against real world frames, the histogram distances and the bound stated from them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from demo._long_play_stats import image_report
from demo.actions import frame_actions, random_play
from demo.image_stats import (
    avatar_count,
    avatar_map,
    avatar_visible,
    colour_histogram,
    histogram_distance,
    self_variation_bound,
    spectral_peak,
    texture_histogram,
)
from demo.themes import THEME_NAMES
from demo.world import World, WorldParams, initial_state, render, stack_terrains, to_uint8

_NO_AVATAR = WorldParams(avatar_radius=0.0, avatar_outline=0.0, facing_radius=0.0)


@pytest.fixture(scope="module")
def frames_by_theme() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per theme: 24 frames of random play on one map, with the avatar and without it."""
    actions = frame_actions(random_play(1, 24, torch.Generator().manual_seed(5)))
    world = World(900_777, "meadow")
    out = {}
    for theme in THEME_NAMES:
        with_avatar = World(900_777, theme, terrain=world.terrain).rollout(actions)
        without = World(900_777, theme, _NO_AVATAR, terrain=world.terrain).rollout(actions)
        out[theme] = (with_avatar, without)
    return out


@pytest.mark.slow
def test_the_avatar_detector_finds_the_avatar_in_every_true_frame_of_every_theme(frames_by_theme) -> None:
    for theme, (frames, _) in frames_by_theme.items():
        assert avatar_visible(frames).tolist() == [True] * len(frames), theme


def test_the_avatar_detector_finds_nothing_when_the_world_draws_no_avatar(frames_by_theme) -> None:
    for theme, (_, frames) in frames_by_theme.items():  # autumn's red crowns included
        assert int(avatar_visible(frames).sum()) == 0, theme


@pytest.mark.slow
def test_red_autumn_crowns_almost_never_pass_for_the_avatar() -> None:
    """300 random places of an autumn map (red crowns everywhere) drawn without the avatar: measured
    2 false finds in 900 over three maps (0.2%); at most 1% here."""
    world = World(900_002, "autumn", _NO_AVATAR)
    places = torch.rand(300, 2, generator=torch.Generator().manual_seed(2)) * 512
    frames = render(stack_terrains([world.terrain]), initial_state(places.round()),
                    torch.full((300,), THEME_NAMES.index("autumn")), _NO_AVATAR,
                    episode=torch.zeros(300, dtype=torch.long))
    assert int(avatar_visible(to_uint8(frames)).sum()) <= 3


def test_an_avatar_away_from_the_centre_does_not_count(frames_by_theme) -> None:
    frames = frames_by_theme["meadow"][0]
    moved = np.roll(frames, shift=(0, 20), axis=(1, 2))
    assert int(avatar_visible(moved).sum()) == 0


def test_a_red_disc_without_its_dark_outline_does_not_count() -> None:
    frame = np.full((128, 128, 3), (242, 77, 51), dtype=np.uint8)  # all avatar red: no ring darker than it
    assert avatar_visible(frame[None]).tolist() == [False]


def test_the_scanning_test_at_the_centre_is_the_centre_test(frames_by_theme) -> None:
    for theme, (with_avatar, without) in frames_by_theme.items():
        for frames in (with_avatar, without, np.roll(with_avatar, shift=(3, -2), axis=(1, 2))):
            assert avatar_map(frames)[:, 64, 64].tolist() == avatar_visible(frames).tolist(), theme


def test_the_avatar_counter_counts_one_disc_in_every_true_frame_and_none_without_it(frames_by_theme) -> None:
    for theme, (with_avatar, without) in frames_by_theme.items():
        assert avatar_count(with_avatar).tolist() == [1] * len(with_avatar), theme
        assert avatar_count(without).tolist() == [0] * len(without), theme


@pytest.mark.slow
def test_autumn_crowns_pass_the_one_sided_outline_test_but_are_not_counted() -> None:
    """A shaded crown's outline is dark on one side only: the centre test's ring average lets some
    through somewhere in nearly every frame, the counter's all-round test none (measured 0 of 300)."""
    world = World(900_002, "autumn", _NO_AVATAR)
    places = torch.rand(300, 2, generator=torch.Generator().manual_seed(2)) * 512
    frames = to_uint8(render(stack_terrains([world.terrain]), initial_state(places.round()),
                             torch.full((300,), THEME_NAMES.index("autumn")), _NO_AVATAR,
                             episode=torch.zeros(300, dtype=torch.long)))
    assert int(avatar_map(frames).any(axis=(1, 2)).sum()) >= 250
    assert int((avatar_count(frames) > 0).sum()) == 0


def _patch_avatar(frames: np.ndarray, dx: int) -> np.ndarray:
    """The frames with their centre's avatar (the disc of 6.5 px, outline included) copied ``dx`` px
    to the side."""
    yy, xx = np.mgrid[0:128, 0:128]
    disc = (yy - 64) ** 2 + (xx - 64) ** 2 <= 6.5 ** 2
    out = frames.copy()
    out[:, np.roll(disc, dx, axis=1)] = frames[:, disc]
    return out


def test_a_second_avatar_beside_the_first_is_counted(frames_by_theme) -> None:
    frames = frames_by_theme["meadow"][0]
    doubled = _patch_avatar(frames, 13)  # touching: 13 px between centres
    assert avatar_count(doubled).tolist() == [2] * len(frames)
    assert avatar_visible(doubled).tolist() == [True] * len(frames)  # the centre test still passes it


def test_two_avatars_either_side_of_the_centre_fail_the_centre_test_and_count_two(frames_by_theme) -> None:
    frames = frames_by_theme["meadow"][0]
    apart = np.roll(_patch_avatar(frames, 14), shift=-7, axis=2)  # centres 7 px left and right of the middle
    assert avatar_visible(apart).tolist() == [False] * len(frames)
    assert avatar_count(apart).tolist() == [2] * len(frames)


def test_an_avatar_moved_off_the_centre_is_one_disc_the_centre_test_misses(frames_by_theme) -> None:
    moved = np.roll(frames_by_theme["snow"][0], shift=(0, 20), axis=(1, 2))
    assert avatar_count(moved).tolist() == [1] * len(moved)


def test_the_image_report_gives_the_share_of_frames_with_a_doubled_avatar(frames_by_theme) -> None:
    truth = np.concatenate([frames_by_theme["meadow"][0], frames_by_theme["rain"][0]])  # 48 frames: 3 s at 16
    model = truth.copy()
    model[20:28] = _patch_avatar(truth[20:28], 13)  # 8 doubled frames, all in the second second (frames 16-31)
    report = image_report(model, truth, ["meadow"] * 24 + ["rain"] * 24, 16)
    assert report["avatar"]["model_several_share"] == 8 / 48
    assert report["avatar"]["truth_several_share"] == 0.0
    assert report["avatar"]["model_seconds_with_several"] == 1
    assert report["avatar"]["model_share"] == 1.0


def test_periodic_grids_and_stripes_score_far_above_every_true_frame(frames_by_theme) -> None:
    world_peaks = [spectral_peak(f) for frames, _ in frames_by_theme.values() for f in frames[::6]]
    assert max(world_peaks) < 100.0
    rng = np.random.default_rng(0)
    base = frames_by_theme["meadow"][0][0].astype(np.float64)
    yy, xx = np.mgrid[0:128, 0:128]
    # a blurred grid of blobs every 14 px over the real frame's colours: a collapse as the model makes it
    blobs = (np.cos(2 * np.pi * yy / 14) + np.cos(2 * np.pi * xx / 14))[..., None] * 30
    grid = np.clip(base.mean(axis=(0, 1)) + blobs + rng.normal(0, 3, (128, 128, 1)), 0, 255).astype(np.uint8)
    stripes = np.clip(base * 0.5 + 60 * (np.sin(2 * np.pi * yy / 9) > 0)[..., None], 0, 255).astype(np.uint8)
    assert spectral_peak(grid) > 10 * max(world_peaks)
    assert spectral_peak(stripes) > 10 * max(world_peaks)


def test_a_flat_frame_has_no_spectral_peak() -> None:
    assert spectral_peak(np.full((64, 64, 3), 90, dtype=np.uint8)) == 0.0


def test_colour_histograms_are_normalised_and_count_exact_bins() -> None:
    frame = np.zeros((4, 4, 3), dtype=np.uint8)
    frame[:2] = (255, 0, 0)  # half red: bin (7, 0, 0) of 8 per channel
    hist = colour_histogram(frame[None])
    assert hist.shape == (512,)
    assert hist[0] == 0.5 and hist[7 * 64] == 0.5 and hist.sum() == 1.0


def test_the_histogram_distance_is_total_variation() -> None:
    a, b = np.array([0.5, 0.5, 0.0]), np.array([0.0, 0.5, 0.5])
    assert histogram_distance(a, b) == 0.5
    assert histogram_distance(a, a) == 0.0


def test_stripes_pile_the_gradient_orientations_into_one_bin() -> None:
    yy = np.mgrid[0:64, 0:64][0]
    stripes = np.repeat((120 + 80 * np.sin(2 * np.pi * yy / 8))[..., None], 3, axis=2).astype(np.uint8)
    orient = texture_histogram(stripes[None])[-8:]
    assert orient.sum() == pytest.approx(0.5)
    assert orient.max() / orient.sum() > 0.95  # horizontal stripes: gradients all vertical


def test_the_bound_is_the_quantile_of_the_worlds_own_distances_between_nearby_seconds() -> None:
    hists = [np.array([1.0, 0.0]), np.array([0.8, 0.2]), np.array([0.5, 0.5]), np.array([0.0, 1.0])]
    # pairs within 2 s, same theme: (0,1) 0.2, (0,2) 0.5, (1,2) 0.3; second 3 is another theme
    bound = self_variation_bound(hists, ["a", "a", "a", "b"], max_gap=2, quantile=1.0)
    assert bound == pytest.approx(0.5)
    assert self_variation_bound(hists, ["a", "a", "a", "b"], max_gap=1, quantile=1.0) == pytest.approx(0.3)


def test_no_bound_without_two_seconds_of_one_theme() -> None:
    with pytest.raises(ValueError, match="two seconds under one theme"):
        self_variation_bound([np.ones(2) / 2, np.ones(2) / 2], ["a", "b"])


def test_the_true_world_sits_within_its_own_bound_and_a_wrong_theme_does_not(frames_by_theme) -> None:
    meadow, snow = frames_by_theme["meadow"][0], frames_by_theme["snow"][0]
    seconds = [colour_histogram(meadow[i:i + 8]) for i in range(0, 24, 8)]
    bound = self_variation_bound(seconds, ["meadow"] * 3, quantile=1.0)
    assert histogram_distance(colour_histogram(meadow[:8]), seconds[1]) <= bound
    assert histogram_distance(colour_histogram(snow[:8]), seconds[0]) > bound
