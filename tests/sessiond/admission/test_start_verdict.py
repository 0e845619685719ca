"""A verdict at its edge stays the same from start to start of one machine
(sessiond/admission/start_verdict.py): certain verdicts as measured, edge verdicts read cautiously
around the machine's median, the history kept per fingerprint and never in the way of a start."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from sessiond.admission.start_verdict import (
    KEEP,
    MIN_SPREAD,
    StartHistory,
    StartRecord,
    fingerprint,
    settle_verdict,
)


def _edge_policy(threshold: float):
    """A policy stand-in whose Director count is 2 while the profile, scaled, costs at most
    `threshold` (World 1 always), and which remembers the scale it was left at."""
    state = {"scale": 1.0}

    def serves_at(scales: Mapping[int, float]) -> dict[str, int]:
        state["scale"] = scales[1]
        return {"world": 1, "director": 2 if 0.50 * scales[1] <= threshold else 1}

    def set_scale(scales: Mapping[int, float]) -> None:
        state["scale"] = scales[1]

    return serves_at, set_scale, state


def test_a_verdict_far_from_its_edge_is_planned_as_measured(tmp_path: Path) -> None:
    serves_at, set_scale, state = _edge_policy(threshold=0.60)  # 0.50 x 1.05 = 0.525 still fits
    verdict = settle_verdict({1: 0.57}, serves_at, set_scale, StartHistory(tmp_path / "h.jsonl"), "fp")
    assert verdict.certain and verdict.scale == 1.0 and state["scale"] == 1.0
    assert verdict.serves == {"world": 1, "director": 2}
    assert verdict.readings == {"director": [2, 2, 2], "world": [1, 1, 1]}
    assert verdict.spread == MIN_SPREAD and verdict.starts == 1


def test_an_edge_verdict_without_history_is_the_cautious_reading(tmp_path: Path) -> None:
    serves_at, set_scale, state = _edge_policy(threshold=0.51)  # fits as measured, not at +5%
    verdict = settle_verdict({1: 0.57}, serves_at, set_scale, StartHistory(tmp_path / "h.jsonl"), "fp")
    assert not verdict.certain and not verdict.kept_from_last
    assert verdict.readings["director"] == [1, 2, 2]
    assert verdict.serves == {"world": 1, "director": 1}
    assert verdict.scale == 1.0 + MIN_SPREAD and state["scale"] == 1.0 + MIN_SPREAD
    assert "at its edge" in verdict.phrase() and "director 1-2" in verdict.phrase()


def test_an_edge_verdict_is_the_cautious_reading_whatever_the_last_start_said(tmp_path: Path) -> None:
    history = StartHistory(tmp_path / "h.jsonl")
    history.append(StartRecord("fp", 1.0, 0.57, {"world": 1, "director": 2}, 1.0))
    # this start measured a little slower: as measured it reads 1 Director, hopefully 2; the last
    # start's 2 is only the hopeful reading, which would admit into stalls on a slower spell
    serves_at, set_scale, state = _edge_policy(threshold=0.49)
    verdict = settle_verdict({1: 0.58}, serves_at, set_scale, history, "fp")
    assert verdict.readings["director"] == [1, 1, 2]
    assert not verdict.kept_from_last and verdict.serves == {"world": 1, "director": 1}
    assert verdict.scale == 1.0 + MIN_SPREAD and state["scale"] == 1.0 + MIN_SPREAD
    assert verdict.starts == 2
    assert verdict.phrase().endswith("(director 1-2): the cautious reading")
    # and the next start, reading the same, gives it again, and says it is the last start's
    again = settle_verdict({1: 0.58}, serves_at, set_scale, history, "fp")
    assert again.serves == {"world": 1, "director": 1} and again.starts == 3 and again.kept_from_last
    assert again.phrase().endswith("(director 1-2): the cautious reading, as the last start's")


def test_a_last_verdict_outside_this_starts_readings_is_not_kept(tmp_path: Path) -> None:
    history = StartHistory(tmp_path / "h.jsonl")
    history.append(StartRecord("fp", 1.0, 0.40, {"world": 2, "director": 4}, 1.0))
    serves_at, set_scale, _ = _edge_policy(threshold=0.51)
    verdict = settle_verdict({1: 0.57}, serves_at, set_scale, history, "fp")
    assert not verdict.kept_from_last and verdict.serves == {"world": 1, "director": 1}


def test_the_spread_is_measured_once_three_starts_are_on_record(tmp_path: Path) -> None:
    history = StartHistory(tmp_path / "h.jsonl")
    for cost in (0.50, 0.60):
        history.append(StartRecord("fp", 1.0, cost, {"world": 1, "director": 2}, 1.0))
    serves_at, set_scale, _ = _edge_policy(threshold=0.60)
    verdict = settle_verdict({1: 0.55}, serves_at, set_scale, history, "fp")
    # rates 0.50, 0.60, 0.55: half the range 0.05 over the median 0.55
    assert abs(verdict.spread - 0.05 / 0.55) < 1e-9
    assert verdict.readings["director"] == [2, 2, 2]  # 0.50 x 1.0909 = 0.545 <= 0.60


def test_the_history_keeps_the_last_records_of_each_fingerprint_apart(tmp_path: Path) -> None:
    history = StartHistory(tmp_path / "sub" / "h.jsonl", keep=3)
    history.append(StartRecord("other", 0.0, 0.9, {"world": 0, "director": 0}, 1.0))
    for i in range(5):
        history.append(StartRecord("fp", float(i), 0.5 + i / 100, {"world": 1, "director": 2}, 1.0))
    assert [r.at for r in history.load("fp")] == [2.0, 3.0, 4.0]
    assert [r.world_cost_b1 for r in history.load("other")] == [0.9]
    assert history.load("nobody") == []
    assert KEEP >= 5  # enough starts to measure a spread from


def test_a_corrupt_or_missing_history_never_stops_a_start(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    assert StartHistory(path).load("fp") == []  # missing
    good = json.dumps({"fingerprint": "fp", "at": 1.0, "world_cost_b1": 0.57, "scale": 1.0,
                       "serves": {"world": 1, "director": 2}})
    path.write_text("not json\n{\"fingerprint\": \"fp\"}\n" + good + "\n[1, 2]\n")
    assert [r.serves for r in StartHistory(path).load("fp")] == [{"world": 1, "director": 2}]
    serves_at, set_scale, _ = _edge_policy(threshold=0.51)
    verdict = settle_verdict({1: 0.57}, serves_at, set_scale, StartHistory(path), "fp")
    assert verdict.starts == 2 and verdict.serves == {"world": 1, "director": 1}  # the good record was read
    # the corrupt lines are dropped when the history is written again
    assert all(json.loads(line)["fingerprint"] == "fp" for line in path.read_text().splitlines())
    # a history that cannot be written (its folder is a file) is skipped, the verdict still given
    blocked = tmp_path / "file"
    blocked.write_text("x")
    verdict = settle_verdict({1: 0.57}, serves_at, set_scale, StartHistory(blocked / "h.jsonl"), "fp")
    assert verdict.serves == {"world": 1, "director": 1}


def test_no_history_decides_from_this_start_alone_as_measured_and_states_the_edge() -> None:
    serves_at, set_scale, state = _edge_policy(threshold=0.51)
    verdict = settle_verdict({1: 0.57}, serves_at, set_scale, None, "fp")
    assert verdict.history is None and verdict.serves == {"world": 1, "director": 2} and state["scale"] == 1.0
    assert not verdict.certain and verdict.phrase().endswith("(director 1-2): as measured (no start history)")


def test_a_fingerprint_names_the_settings() -> None:
    a = fingerprint({"model": "demo", "threads": 1})
    assert a == fingerprint({"threads": 1, "model": "demo"})
    assert a != fingerprint({"model": "demo", "threads": 2})
    assert len(a) == 16


def test_the_spread_follows_the_batch_that_varies_most_and_shrugs_off_one_disturbed_start(tmp_path: Path) -> None:
    history = StartHistory(tmp_path / "h.jsonl")
    for b1, b2 in ((0.55, 0.50), (0.56, 0.46), (0.57, 0.54), (0.56, 0.50)):
        history.append(StartRecord("fp", 1.0, b1, {"world": 1, "director": 2}, 1.0, {"1": b1, "2": b2}))
    history.append(StartRecord("fp", 1.0, 0.90, {"world": 1, "director": 2}, 1.0, {"1": 0.90, "2": 0.50}))
    serves_at, set_scale, _ = _edge_policy(threshold=0.60)
    verdict = settle_verdict({1: 0.56, 2: 0.50}, serves_at, set_scale, history, "fp")
    # batch 2: 0.46, 0.50, 0.50, 0.50, 0.54, 0.50 -> quartiles 0.50 and 0.50: no spread; batch 1:
    # 0.55, 0.56, 0.56, 0.56, 0.57, 0.90 -> quartiles 0.56 and 0.5675 over the median 0.56
    assert abs(verdict.spread - MIN_SPREAD) < 1e-9  # 0.0075 / 0.56 = 1.3% is under the floor
    history.append(StartRecord("fp", 1.0, 0.56, {"world": 1, "director": 2}, 1.0, {"1": 0.56, "2": 0.62}))
    history.append(StartRecord("fp", 1.0, 0.56, {"world": 1, "director": 2}, 1.0, {"1": 0.56, "2": 0.40}))
    wide = settle_verdict({1: 0.56, 2: 0.66}, serves_at, set_scale, history, "fp")
    # batch 2 over the 8 starts on record (the first settle recorded itself) and this one:
    # 0.40 0.46 0.50 0.50 0.50 0.50 0.54 0.62 0.66 -> quartiles 0.50 and 0.54, median 0.50
    assert wide.starts == 9
    assert abs(wide.spread - (0.54 - 0.50) / 0.50) < 1e-9


def test_a_start_that_measured_off_the_machines_median_is_planned_at_the_median(tmp_path: Path) -> None:
    history = StartHistory(tmp_path / "h.jsonl")
    for _ in range(4):
        history.append(StartRecord("fp", 1.0, 0.50, {"world": 1, "director": 2}, 1.0, {"1": 0.50}))
    serves_at, set_scale, state = _edge_policy(threshold=0.60)
    verdict = settle_verdict({1: 0.60}, serves_at, set_scale, history, "fp")
    # median of 0.50 x4 and 0.60 is 0.50: this start's profile x 0.5 / 0.6
    assert abs(verdict.center["1"] - 0.50 / 0.60) < 1e-9 and verdict.scale == 1.0
    assert verdict.certain and abs(state["scale"] - 0.50 / 0.60) < 1e-9
    # and what it serves is read there: 0.50 x 0.833 (x 1.05 at the cautious end) fits two Directors
    assert verdict.serves == {"world": 1, "director": 2}


def test_each_batch_is_moved_to_its_own_median(tmp_path: Path) -> None:
    history = StartHistory(tmp_path / "h.jsonl")
    for _ in range(3):
        history.append(StartRecord("fp", 1.0, 0.55, {"world": 1, "director": 2}, 1.0, {"1": 0.55, "2": 0.50}))
    seen: list[dict[int, float]] = []

    def serves_at(scales: Mapping[int, float]) -> dict[str, int]:
        seen.append(dict(scales))
        return {"world": 1, "director": 2 if 0.60 * scales[2] <= 0.56 else 1}

    verdict = settle_verdict({1: 0.55, 2: 0.60}, serves_at, lambda scales: None, history, "fp")
    # batch 1 measured at its median (0.55 of 0.55 x3, 0.55): x1; batch 2 at 0.60 against 0.50 x3: x 0.5 / 0.6
    assert verdict.center == {"1": 1.0, "2": 0.50 / 0.60}
    assert seen[1] == {1: 1.0, 2: 0.50 / 0.60}
    assert verdict.serves == {"world": 1, "director": 2}
