"""Bootstrap intervals and paired differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curriculum.stats import bootstrap_mean_ci, paired_difference, pairwise_differences


def test_constant_values_give_a_zero_width_interval():
    iv = bootstrap_mean_ci([0.3] * 5)
    assert (iv.mean, iv.low, iv.high, iv.n) == pytest.approx((0.3, 0.3, 0.3, 5))


def test_interval_is_seeded_and_matches_the_normal_approximation_roughly():
    x = np.random.default_rng(0).normal(1.0, 1.0, size=200)
    a, b = bootstrap_mean_ci(x, seed=3), bootstrap_mean_ci(x, seed=3)
    assert a == b
    se = x.std(ddof=1) / np.sqrt(x.size)
    assert a.high - a.low == pytest.approx(2 * 1.96 * se, rel=0.15)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=1, max_size=12))
def test_interval_contains_the_mean(values):
    iv = bootstrap_mean_ci(values, resamples=500)
    assert iv.low - 1e-9 <= iv.mean <= iv.high + 1e-9


def test_paired_difference_uses_pairs():
    a = [0.5, 0.6, 0.7, 0.8, 0.9]
    b = [0.4, 0.5, 0.6, 0.7, 0.8]  # a − b = 0.1 on every seed: no seed noise left
    iv = paired_difference(a, b)
    assert (iv.mean, iv.low, iv.high) == pytest.approx((0.1, 0.1, 0.1))
    with pytest.raises(ValueError):
        paired_difference([1.0], [1.0, 2.0])


def test_pairwise_differences_over_common_seeds():
    rows = pairwise_differences({"x": {0: 1.0, 1: 2.0, 2: 3.0}, "y": {0: 0.5, 1: 1.0}, "z": {5: 0.0}})
    assert [(r["a"], r["b"]) for r in rows] == [("x", "y")]
    assert rows[0]["mean_diff"] == pytest.approx(0.75) and rows[0]["seeds"] == [0, 1]
