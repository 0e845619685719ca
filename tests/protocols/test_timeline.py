"""pts follow the constant-frame-rate timeline; the golden table is the one the browser client's
copy of the rule (web/timeline.js) is checked against too."""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from pathlib import Path

import pytest

from protocols.timeline import PTS_HZ, TIME_BASE, frame_ticks, pts_for, pts_seconds

GOLDEN = json.loads(Path(__file__).with_name("pts_golden.json").read_text())["cases"]


def _exact(n: int, fps: int) -> int:
    """The rule from its definition: n * 90000 / fps as an exact fraction, plus one half, floored."""
    return math.floor(Fraction(90000 * n, fps) + Fraction(1, 2))


@pytest.mark.parametrize(
    ("n", "fps", "pts"),
    [
        (0, 30, 0),
        (1, 30, 3000),
        (30, 30, 90000),
        (1, 24, 3750),
        (1, 7, 12857),
        (2, 7, 25714),
        (1, 32, 2813),
        (3, 32, 8438),
    ],
)
def test_pts_of_the_nth_frame_is_n_times_90000_over_fps_rounded_half_up(n: int, fps: int, pts: int) -> None:
    assert pts_for(n, fps) == pts


def test_pts_stay_exact_far_into_a_session_where_floats_would_drift() -> None:
    n = 10**15 + 1
    assert pts_for(n, 7) == math.floor(Fraction(90000 * n, 7) + Fraction(1, 2))
    assert pts_for(n, 7) != round(n * 90000 / 7)


@pytest.mark.parametrize(("n", "fps"), [(-1, 30), (0, 0)])
def test_pts_for_rejects_a_negative_frame_or_a_non_positive_fps(n: int, fps: int) -> None:
    with pytest.raises(ValueError):
        pts_for(n, fps)


@pytest.mark.parametrize("case", GOLDEN, ids=lambda c: f"n{c['n']}-fps{c['fps']}")
def test_pts_for_gives_exactly_the_golden_table(case: dict[str, int]) -> None:
    assert pts_for(case["n"], case["fps"]) == case["pts"] == _exact(case["n"], case["fps"])


def test_the_golden_table_covers_common_rates_exact_halves_and_long_sessions() -> None:
    assert {24, 30, 32} <= {c["fps"] for c in GOLDEN}
    halves = [c for c in GOLDEN if Fraction(90000 * c["n"], c["fps"]).denominator == 2]
    assert len(halves) >= 10
    assert all(c["pts"] == Fraction(90000 * c["n"], c["fps"]) + Fraction(1, 2) for c in halves)
    assert {"n": 1, "fps": 32, "pts": 2813} in GOLDEN
    assert max(c["n"] for c in GOLDEN) >= 2**31


@pytest.mark.parametrize(("n", "fps", "ticks"), [(0, 30, 3000), (0, 32, 2813), (1, 32, 2812), (2, 32, 2813),
                                                 (0, 7, 12857), (3, 7, 12858)])
def test_a_frame_lasts_until_the_next_frames_pts(n: int, fps: int, ticks: int) -> None:
    assert frame_ticks(n, fps) == ticks


def test_frame_durations_add_up_to_whole_seconds_at_32_fps() -> None:
    assert sum(frame_ticks(n, 32) for n in range(32)) == PTS_HZ == pts_for(32, 32)


def test_pts_convert_to_seconds_on_the_90_khz_clock() -> None:
    assert pts_seconds(0) == 0.0
    assert pts_seconds(135000) == 1.5
    assert pts_seconds(pts_for(16, 16)) == 1.0
    assert (TIME_BASE.numerator, TIME_BASE.denominator) == (1, 90000)


def test_the_web_client_writes_the_90_khz_rate_once() -> None:
    web = Path(__file__).resolve().parents[2] / "web"
    literal = re.compile(r"(?<![\w.])90_?000(?![\w.])")
    code = {path.name: re.sub(r"//[^\n]*", "", path.read_text()) for path in sorted(web.glob("*.js"))}  # no comments
    found = {name: len(literal.findall(text)) for name, text in code.items()}
    assert {name: n for name, n in found.items() if n} == {"timeline.js": 1}  # `PTS_HZ`, imported elsewhere
