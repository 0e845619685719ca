"""Action merging (PROTOCOL.md): held state latest wins, mouse accumulates, stale seq ignored,
over the rate limit coalesced."""

from __future__ import annotations

from sessiond.session.actions import ActionInput, ActionState


def test_held_keys_buttons_and_axes_are_the_latest_message() -> None:
    state = ActionState(max_per_s=240)
    state.accept(ActionInput(0, ("w",), buttons=1, axes=(0.5,)), now=0.0)
    state.accept(ActionInput(1, ("a", "s"), buttons=2), now=0.01)
    sample = state.sample()
    assert (sample.keys, sample.buttons, sample.axes, sample.action_seq) == (("a", "s"), 2, (0.5,), 1)


def test_mouse_movements_accumulate_until_a_chunk_consumes_them() -> None:
    state = ActionState(max_per_s=240)
    state.accept(ActionInput(0, (), mouse=(1.0, 2.0)), now=0.0)
    state.accept(ActionInput(1, (), mouse=(0.5, -3.0)), now=0.0)
    assert state.sample().mouse == (1.5, -1.0)
    assert state.sample().mouse == (0.0, 0.0)  # consumed


def test_an_old_or_repeated_seq_is_ignored() -> None:
    state = ActionState(max_per_s=240)
    assert state.accept(ActionInput(5, ("w",)), now=0.0) == "ok"
    assert state.accept(ActionInput(5, ("a",)), now=0.0) == "stale"
    assert state.accept(ActionInput(3, ("d",), mouse=(9.0, 9.0)), now=0.0) == "stale"
    sample = state.sample()
    assert (sample.keys, sample.mouse, sample.action_seq) == (("w",), (0.0, 0.0), 5)


def test_no_action_yet_samples_seq_minus_one() -> None:
    assert ActionState(max_per_s=240).sample().action_seq == -1


def test_over_the_rate_actions_are_coalesced_and_still_win() -> None:
    state = ActionState(max_per_s=3)
    verdicts = [state.accept(ActionInput(i, (f"k{i}",), mouse=(1.0, 0.0)), now=0.1 * i) for i in range(5)]
    assert verdicts == ["ok", "ok", "ok", "coalesced", "coalesced"]
    sample = state.sample()
    assert (sample.keys, sample.mouse, sample.action_seq) == (("k4",), (5.0, 0.0), 4)
    assert state.accept(ActionInput(5, ()), now=1.05) == "ok"  # the window moved on


def test_action_to_photon_latencies_are_reported_once_per_action() -> None:
    state = ActionState(max_per_s=240)
    for seq, t in ((0, 1.0), (1, 1.5), (2, 2.0)):
        state.accept(ActionInput(seq, ()), now=t)
    assert state.photons(1, now=3.0) == [2.0, 1.5]
    assert state.photons(1, now=4.0) == []
    assert state.photons(2, now=4.0) == [2.0]
