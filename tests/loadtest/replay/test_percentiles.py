"""Percentiles over all samples; no samples means null."""

from __future__ import annotations

import pytest

from loadtest.replay.percentiles import percentile, summarize


def test_percentiles_interpolate_linearly_between_ranks() -> None:
    samples = [10.0, 20.0, 30.0, 40.0]
    assert percentile(samples, 50) == 25.0
    assert percentile(samples, 95) == pytest.approx(38.5)
    assert percentile(samples, 0) == 10.0
    assert percentile(samples, 100) == 40.0


def test_a_single_sample_is_every_percentile() -> None:
    assert summarize([7.0]) == {"p50": 7.0, "p95": 7.0, "max": 7.0}


def test_a_statistic_without_samples_is_null_not_zero() -> None:
    assert summarize([]) == {"p50": None, "p95": None, "max": None}
    assert percentile([], 50) is None


def test_order_of_samples_does_not_matter() -> None:
    assert summarize([3.0, 1.0, 2.0], ("p50", "max", "min", "mean")) == {"p50": 2.0, "max": 3.0, "min": 1.0,
                                                                          "mean": 2.0}


def test_a_percentile_outside_0_to_100_is_refused() -> None:
    with pytest.raises(ValueError, match="percentile must be in"):
        percentile([1.0], 101)
