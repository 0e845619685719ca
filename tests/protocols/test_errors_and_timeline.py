"""The error codes are exactly PROTOCOL.md's; pts follow the constant-frame-rate timeline."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from protocols.errors import ErrorCode, ProtocolError
from protocols.timeline import pts_for


def test_error_codes_are_exactly_the_thirteen_of_the_protocol() -> None:
    assert [code.value for code in ErrorCode] == [
        "bad_message",
        "unknown_type",
        "invalid_field",
        "too_large",
        "unsupported_version",
        "unauthorized",
        "not_found",
        "capacity",
        "rate_limited",
        "conflict",
        "internal",
        "engine_fault",
        "store_unavailable",
    ]


def test_a_protocol_error_carries_code_message_and_field() -> None:
    err = ProtocolError(ErrorCode.INVALID_FIELD, "`seq` must be an integer", "seq")
    assert (err.code, err.message, err.field, str(err)) == (
        ErrorCode.INVALID_FIELD,
        "`seq` must be an integer",
        "seq",
        "invalid_field: `seq` must be an integer",
    )


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
