"""The procedural world: deterministic by seed, moved by keys, mouse and axes, themed by prompts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from demo.actions import DEMO_KEYS, frame_actions, random_play
from demo.data import EpisodeSource, SourceParams
from demo.errors import DemoError
from demo.terrain import Terrain, generate_terrain
from demo.themes import PROMPT_EXAMPLES, THEME_NAMES, theme_for_prompt
from demo.world import World, WorldParams
from engine.api import FrameAction

SEED = 11
PARAMS = WorldParams(map_size=256)
AVATAR = slice(64 - 10, 64 + 10)  # rows/cols around the centred avatar


@pytest.fixture(scope="module")
def land() -> Terrain:
    return generate_terrain(SEED, PARAMS.map_size)


def _world(land: Terrain, prompt: str = "") -> World:
    return World(SEED, prompt, PARAMS, terrain=land)


def _hold(world: World, keys: tuple[str, ...], frames: int) -> np.ndarray:
    return world.rollout([FrameAction(keys=keys)] * frames)


def _without_avatar(frame: np.ndarray) -> np.ndarray:
    out = frame.astype(np.int32).copy()
    out[AVATAR, AVATAR] = -1
    return out


def test_same_seed_and_actions_give_identical_frames(land: Terrain) -> None:
    actions = [FrameAction(keys=("d", "w"))] * 6 + [FrameAction(mouse=(8.0, -4.0))] * 3
    a = _world(land, "snow").rollout(actions)
    b = _world(land, "snow").rollout(actions)
    assert a.shape == (9, 128, 128, 3)
    assert a.dtype == np.uint8
    assert np.array_equal(a, b)


def test_the_map_is_a_function_of_the_seed(land: Terrain) -> None:
    again = generate_terrain(SEED, PARAMS.map_size)
    assert torch.equal(again.material, land.material)
    assert torch.equal(again.light, land.light)
    assert torch.equal(again.detail, land.detail)


def test_different_seeds_give_different_landscapes(land: Terrain) -> None:
    a = _world(land).frame()
    b = World(SEED + 1, params=PARAMS).frame()
    assert np.mean(a != b) > 0.5


@pytest.mark.parametrize(
    ("keys", "axis", "sign"),
    [(("d",), 1, 1), (("a",), 1, -1), (("s",), 0, 1), (("w",), 0, -1),
     (("arrowright",), 1, 1), (("arrowleft",), 1, -1), (("arrowdown",), 0, 1), (("arrowup",), 0, -1)],
)
def test_a_held_key_scrolls_the_view_by_the_avatars_integer_displacement(
    land: Terrain, keys: tuple[str, ...], axis: int, sign: int
) -> None:
    world = _world(land)
    _hold(world, keys, 10)
    before_pos, before = world.position, world.frame()
    after = world.step(FrameAction(keys=keys))
    shift = round(world.position[axis]) - round(before_pos[axis])
    assert sign * shift >= 3  # near terminal speed: 0.9 / (1 - 0.78) ~ 4 px per frame
    # moving right (+x) slides the scene left: after[:, x] == before[:, x + shift]
    old, new = _without_avatar(before), _without_avatar(after)
    n = 128 - abs(shift)
    src = slice(shift, shift + n) if shift > 0 else slice(0, n)
    dst = slice(0, n) if shift > 0 else slice(-shift, -shift + n)
    if axis == 1:
        a, b = new[:, dst], old[:, src]
    else:
        a, b = new[dst], old[src]
    known = (a >= 0) & (b >= 0)
    assert np.array_equal(a[known], b[known])


def test_arrow_keys_move_exactly_like_wasd(land: Terrain) -> None:
    a = _world(land).rollout([FrameAction(keys=("d", "w"))] * 5)
    b = _world(land).rollout([FrameAction(keys=("arrowright", "arrowup"))] * 5)
    assert np.array_equal(a, b)


def test_momentum_carries_the_avatar_after_the_key_is_released(land: Terrain) -> None:
    world = _world(land)
    _hold(world, ("d",), 10)
    x0 = world.position[1]
    world.step(FrameAction())
    x1 = world.position[1]
    world.step(FrameAction())
    x2 = world.position[1]
    assert x1 - x0 > x2 - x1 > 0.5


def test_shift_runs_faster_and_space_brakes(land: Terrain) -> None:
    walk, run, brake = _world(land), _world(land), _world(land)
    start = walk.position[1]
    _hold(walk, ("d",), 12)
    _hold(run, ("d", "shift"), 12)
    _hold(brake, ("d",), 10)
    _hold(brake, ("space",), 2)
    assert run.position[1] - start > 1.5 * (walk.position[1] - start)
    braked = brake.position[1]
    brake.step(FrameAction())
    assert brake.position[1] - braked < 0.5


def test_mouse_pans_by_a_quarter_of_its_movement_clamped_to_six_pixels(land: Terrain) -> None:
    world = _world(land)
    y0, x0 = world.position
    world.step(FrameAction(mouse=(8.0, -12.0)))
    assert world.position == (y0 - 3.0, x0 + 2.0)
    world.step(FrameAction(mouse=(400.0, 0.0)))
    assert world.position == (y0 - 3.0, x0 + 8.0)


def test_axes_push_like_a_stick(land: Terrain) -> None:
    world = _world(land)
    y0, x0 = world.position
    world.step(FrameAction(axes=(0.0, 1.0)))
    assert world.position == pytest.approx((y0 + 0.9, x0))


def test_keys_outside_the_action_space_are_a_coded_error(land: Terrain) -> None:
    with pytest.raises(DemoError) as err:
        _world(land).step(FrameAction(keys=("q",)))
    assert err.value.code == "unknown_key"


def test_axes_out_of_range_are_a_coded_error(land: Terrain) -> None:
    with pytest.raises(DemoError) as err:
        _world(land).step(FrameAction(axes=(0.0, 1.5)))
    assert err.value.code == "bad_axes"


def test_prompt_words_pick_the_theme() -> None:
    assert theme_for_prompt("") == "meadow"
    assert theme_for_prompt("a quiet landscape") == "meadow"
    assert theme_for_prompt("A SNOWY hill") == "snow"
    assert theme_for_prompt("night rain") == "night"
    assert theme_for_prompt("dunes of the desert") == "desert"
    assert theme_for_prompt("fall leaves") == "autumn"
    assert theme_for_prompt("stormy sea") == "rain"


def test_the_example_prompts_name_each_theme_once_the_default_first() -> None:
    themes = [theme_for_prompt(p) for p in PROMPT_EXAMPLES]
    assert themes == ["meadow", "desert", "snow", "autumn", "rain", "night"]
    assert sorted(themes) == sorted(THEME_NAMES)


def test_themes_change_the_colours_of_the_same_place_strongly(land: Terrain) -> None:
    means = {}
    for name in THEME_NAMES:
        world = _world(land, name)
        means[name] = world.frame().reshape(-1, 3).mean(axis=0)
    names = list(means)
    gaps = [float(np.abs(means[a] - means[b]).sum()) for i, a in enumerate(names) for b in names[i + 1:]]
    assert min(gaps) > 20.0


def test_a_prompt_change_recolours_the_next_frame_and_keeps_the_place(land: Terrain) -> None:
    world = _world(land, "meadow")
    meadow = world.frame()
    world.set_prompt("desert")
    desert = world.step(FrameAction())
    assert world.theme == "desert"
    assert np.mean(meadow != desert) > 0.5
    grey_m, grey_d = meadow.mean(axis=2), desert.mean(axis=2)
    assert np.corrcoef(np.diff(grey_m, axis=1).ravel(), np.diff(grey_d, axis=1).ravel())[0, 1] > 0.5


def test_random_play_is_deterministic_and_never_holds_opposite_keys() -> None:
    a = random_play(8, 64, torch.Generator().manual_seed(3))
    b = random_play(8, 64, torch.Generator().manual_seed(3))
    assert torch.equal(a.keys, b.keys) and torch.equal(a.mouse, b.mouse) and torch.equal(a.axes, b.axes)
    k = {name: a.keys[..., i] for i, name in enumerate(DEMO_KEYS)}
    for up, down in (("w", "s"), ("a", "d"), ("arrowup", "arrowdown"), ("arrowleft", "arrowright")):
        assert float((k[up] * k[down]).sum()) == 0.0
    assert float(a.keys.sum()) > 0.0


def test_from_rest_episodes_stand_still_for_whole_chunks_then_hold_one_direction() -> None:
    fpc = 4
    source = EpisodeSource(PARAMS, torch.device("cpu"), seed=5,
                           params=SourceParams(pool_size=1, from_rest_probability=1.0, switch_probability=0.0))
    episodes = source.sample(6, 6 * fpc, fpc)
    keys = episodes.actions.keys
    assert float(episodes.actions.mouse.abs().sum()) == 0.0 and float(episodes.actions.axes.abs().sum()) == 0.0
    for b in range(6):
        pressed = torch.nonzero(keys[b].sum(dim=1) > 0).flatten()
        start = int(pressed[0])
        assert start in (4, 8, 12)  # 1-3 whole chunks of rest (the warm-up is at rest too)
        assert torch.equal(keys[b, start:], keys[b, start:start + 1].expand(6 * fpc - start, -1))  # held to the end
        held = [DEMO_KEYS[i] for i in torch.nonzero(keys[b, start]).flatten().tolist()]
        movement = [k for k in held if k != "shift"]
        assert 1 <= len(movement) <= 2 and set(movement) <= {"w", "a", "s", "d"}
        still = episodes.frames[b, :start]  # the camera does not move while at rest (meadow has no rain)
        if int(episodes.themes[b, 0]) != THEME_NAMES.index("rain"):
            assert torch.equal(still, still[:1].expand_as(still))
        assert not torch.equal(episodes.frames[b, -1], episodes.frames[b, start - 1])


def test_episodes_render_the_same_pixels_whatever_the_steps_per_render_call() -> None:
    def draw(render_steps: int) -> torch.Tensor:
        source = EpisodeSource(PARAMS, torch.device("cpu"), seed=9,
                               params=SourceParams(pool_size=2, render_steps=render_steps, switch_probability=1.0))
        return source.sample(3, 10, 2).frames

    one_per_call = draw(1)
    assert one_per_call.shape == (3, 10, 3, 128, 128)
    for steps in (3, 10, 16):
        assert torch.equal(draw(steps), one_per_call)


def test_an_episode_source_frame_is_the_world_s_own_frame(land: Terrain) -> None:
    """Frame t of a training episode is what the evaluation's World renders after the same actions
    from the same position (same map, same theme)."""
    source = EpisodeSource(PARAMS, torch.device("cpu"), seed=4,
                           params=SourceParams(pool_size=1, warmup_frames=0, switch_probability=0.0,
                                               from_rest_probability=0.0, render_steps=4))
    source._pool = [land]  # the map the World below uses
    gen_state = source.gen.get_state()
    episodes = source.sample(1, 8, 4)
    source.gen.set_state(gen_state)
    torch.randint(0, 1, (1,), generator=source.gen)  # the pool pick
    start = (torch.rand(1, 2, generator=source.gen) * PARAMS.map_size).round()
    world = _world(land, THEME_NAMES[int(episodes.themes[0, 0])])
    world.state = type(world.state)(start, torch.zeros(1, 2), world.state.facing, torch.zeros(1, dtype=torch.long))
    truth = world.rollout(frame_actions(episodes.actions))
    model_view = ((episodes.frames[0].permute(0, 2, 3, 1) + 1.0) / 2.0 * 255.0).round().to(torch.uint8).numpy()
    assert np.array_equal(model_view, truth)
