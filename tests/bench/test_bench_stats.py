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


def test_sign_test_is_the_exact_binomial_tail():
    from curriculum.stats import sign_test

    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 2) == pytest.approx(2 * (1 + 7 + 21) / 2**7)
    assert sign_test(2, 5) == sign_test(5, 2)
    assert sign_test(10, 0) == pytest.approx(2 / 2**10)
    assert sign_test(3, 3) == 1.0


def test_paired_tasks_uses_only_shared_tasks():
    from curriculum.stats import paired_tasks

    a = {"t1": 1.0, "t2": 1.0, "t3": 0.0, "t4": 1.0, "only_a": 1.0}
    b = {"t1": 0.0, "t2": 1.0, "t3": 1.0, "t4": 0.0, "only_b": 0.0}
    result = paired_tasks(a, b)
    assert (result.tasks, result.rose, result.fell) == (4, 2, 1)
    assert result.difference.mean == pytest.approx(0.25)
    assert result.difference.low <= 0.25 <= result.difference.high
    assert result.sign_test_p == 1.0
    assert "4 shared tasks: +25.0 points" in result.line()
    with pytest.raises(ValueError, match="share no task"):
        paired_tasks({"x": 1.0}, {"y": 1.0})
