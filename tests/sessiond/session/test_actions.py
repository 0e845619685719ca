"""The action timeline: merging (docs/protocol.md: held state latest wins, mouse accumulates, stale seq
ignored), the one action rate policy (over it: coalesced), and the check against the model's
action space."""

from __future__ import annotations

from typing import Any

import pytest

from engine.api import ActionSpace, FrameAction
from protocols.messages import Action
from sessiond.session.actions import ActionTimeline

_SPACE = ActionSpace(keys=("w", "a"), mouse=True, buttons=2, axes=2)


def _a(seq: int, keys: tuple[str, ...], **fields: Any) -> Action:
    return Action(seq=seq, ts=0.0, keys=keys, **fields)


def _timeline(max_per_s: int) -> ActionTimeline:
    return ActionTimeline(_SPACE, max_per_s=max_per_s)


def test_held_keys_buttons_and_axes_are_the_latest_message() -> None:
    state = _timeline(max_per_s=240)
    state.accept(_a(0, ("w",), buttons=1, axes=(0.5,)), now=0.0)
    state.accept(_a(1, ("a", "s"), buttons=2), now=0.01)
    sample = state.sample()
    assert (sample.keys, sample.buttons, sample.axes, state.last_seq) == (("a", "s"), 2, (0.5,), 1)


def test_mouse_movements_accumulate_until_a_chunk_consumes_them() -> None:
    state = _timeline(max_per_s=240)
    state.accept(_a(0, (), mouse=(1.0, 2.0)), now=0.0)
    state.accept(_a(1, (), mouse=(0.5, -3.0)), now=0.0)
    assert state.sample().mouse == (1.5, -1.0)
    assert state.sample().mouse == (0.0, 0.0)  # consumed


def test_an_old_or_repeated_seq_is_ignored() -> None:
    state = _timeline(max_per_s=240)
    assert state.accept(_a(5, ("w",)), now=0.0) == "ok"
    assert state.accept(_a(5, ("a",)), now=0.0) == "stale"
    assert state.accept(_a(3, ("d",), mouse=(9.0, 9.0)), now=0.0) == "stale"
    sample = state.sample()
    assert (sample.keys, sample.mouse, state.last_seq) == (("w",), (0.0, 0.0), 5)


def test_no_action_yet_samples_seq_minus_one() -> None:
    state = _timeline(max_per_s=240)
    assert (state.sample(), state.last_seq) == (FrameAction(), -1)


def test_over_the_rate_actions_are_coalesced_and_still_win() -> None:
    state = _timeline(max_per_s=3)
    verdicts = [state.accept(_a(i, (f"k{i}",), mouse=(1.0, 0.0)), now=0.1 * i) for i in range(5)]
    assert verdicts == ["ok", "ok", "ok", "coalesced", "coalesced"]
    sample = state.sample()
    assert (sample.keys, sample.mouse, state.last_seq) == (("k4",), (5.0, 0.0), 4)
    assert state.accept(_a(5, ()), now=1.05) == "ok"  # the window moved on


def test_action_to_photon_latencies_are_reported_once_per_action() -> None:
    state = _timeline(max_per_s=240)
    for seq, t in ((0, 1.0), (1, 1.5), (2, 2.0)):
        state.accept(_a(seq, ()), now=t)
    assert state.photons(1, now=3.0) == [2.0, 1.5]
    assert state.photons(1, now=4.0) == []
    assert state.photons(2, now=4.0) == [2.0]


def test_a_flood_at_one_instant_is_merged_and_the_latest_wins() -> None:
    state = _timeline(max_per_s=240)
    verdicts = [state.accept(_a(seq, ("w",) if seq % 2 else ("a",), mouse=(1.0, 0.0)), now=5.0) for seq in range(500)]
    assert (verdicts.count("ok"), verdicts.count("coalesced")) == (240, 260)
    assert (state.sample(), state.last_seq) == (FrameAction(keys=("w",), mouse=(500.0, 0.0)), 499)


def test_a_nonpositive_action_rate_is_refused() -> None:
    with pytest.raises(ValueError, match="action rate 0/s"):
        _timeline(max_per_s=0)


@pytest.mark.parametrize(("action", "field"), [
    (Action(seq=0, ts=0.0, keys=("w", "q")), "keys"),
    (Action(seq=0, ts=0.0, keys=(), buttons=4), "buttons"),
    (Action(seq=0, ts=0.0, keys=(), axes=(0.0, 0.0, 0.0)), "axes"),
    (Action(seq=0, ts=0.0, keys=(), axes=(1.5,)), "axes"),
])
def test_an_action_outside_the_models_action_space_names_its_field(action: Action, field: str) -> None:
    problem = _timeline(max_per_s=240).check(action)
    assert problem is not None and problem[0] == field


def test_an_action_inside_the_action_space_passes() -> None:
    action = Action(seq=0, ts=0.0, keys=("w",), mouse=(1.0, 2.0), buttons=3, axes=(1.0, -1.0))
    assert _timeline(max_per_s=240).check(action) is None
