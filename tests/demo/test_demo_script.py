"""The scripted vigorous play of the long-play evaluation: seeded, every direction held 2-10 s,
runs, brakes and prompt changes at chunk boundaries."""

from __future__ import annotations

from demo.script import HELD_DIRECTIONS, scripted_play
from demo.themes import theme_for_prompt


def test_the_same_seed_gives_the_same_play_and_another_seed_another() -> None:
    a, b, c = scripted_play(60, seed=3), scripted_play(60, seed=3), scripted_play(60, seed=4)
    assert a == b
    assert a.actions != c.actions


def test_the_play_covers_whole_chunks_with_one_prompt_per_chunk() -> None:
    play = scripted_play(300, seed=17)
    assert len(play.actions) == 4800
    assert len(play.prompts) == 1200
    assert play.segments[0].start == 0 and play.segments[-1].end == 4800
    assert all(a.end == b.start for a, b in zip(play.segments, play.segments[1:], strict=False))


def test_every_direction_is_held_between_2_and_10_seconds() -> None:
    play = scripted_play(300, seed=17)
    held = [s for s in play.segments if s.kind in ("hold", "run")]
    assert {s.direction for s in held} == set(HELD_DIRECTIONS)
    assert all(32 <= s.end - s.start <= 160 for s in held[:-1])  # the last one may be cut by the end
    for s in held:
        keys = set(play.actions[s.start].keys) - {"shift"}
        assert keys in ({*HELD_DIRECTIONS[s.direction][0]}, {*HELD_DIRECTIONS[s.direction][1]})
        assert ("shift" in play.actions[s.start].keys) == (s.kind == "run")


def test_the_play_brakes_runs_rests_and_turns() -> None:
    play = scripted_play(300, seed=17)
    kinds = [s.kind for s in play.segments]
    assert {"hold", "run", "brake", "rest", "mouse"} <= set(kinds)
    turns = [(a, b) for a, b in zip(play.segments, play.segments[1:], strict=False)
             if a.direction and b.direction and a.direction != b.direction]
    assert len(turns) >= 5


def test_prompts_change_theme_every_20_to_45_seconds() -> None:
    play = scripted_play(300, seed=17)
    assert len(play.changes) >= 6
    for before, at in zip([0, *play.changes], play.changes, strict=False):
        assert 80 <= at - before <= 180  # chunks of 4 frames at 16 fps
        assert theme_for_prompt(play.prompts[at]) != theme_for_prompt(play.prompts[at - 1])
    assert play.theme_of_chunk(0) == "meadow"
