"""The seed-level paired analysis of ``curriculum.stats``: sign-flip over seeds, t-interval, Holm, MDE,
and the A/A calibration that the task-level test fails."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import t as student_t

from benchmarks.stats_calibration import rejection_rates, synthetic_pair
from curriculum.stats import (VarianceComponents, binomial_default_variance, holm, minimal_detectable_effect,
                              seed_paired, seed_sign_flip_test, seeds_for_mde, t_interval,
                              task_level_sign_flip_test, variance_components)


def test_sign_flip_over_seeds_is_exact():
    # S = 4 all positive: only the all-plus and all-minus vectors reach |mean|, p = 2/16.
    assert seed_sign_flip_test([0.1, 0.2, 0.3, 0.4]) == pytest.approx(2 / 16)
    # Brute force over every sign vector on an uneven example.
    means = [0.3, -0.1, 0.05, 0.2, -0.02]
    hits = sum(abs(np.mean(np.array(eps) * means)) >= abs(np.mean(means)) - 1e-12
               for eps in itertools.product((-1, 1), repeat=len(means)))
    assert seed_sign_flip_test(means) == pytest.approx(hits / 2 ** len(means))
    assert seed_sign_flip_test([0.0, 0.0, 0.0]) == 1.0
    # The smallest p with S seeds is 2 / 2^S: with 6 seeds never below 0.031.
    assert seed_sign_flip_test([1.0] * 6) == pytest.approx(2 / 64)


def test_sign_flip_above_the_exact_limit_is_monte_carlo_and_seeded():
    means = list(np.random.default_rng(0).normal(0.5, 1.0, 20))
    p = seed_sign_flip_test(means, resamples=2000, seed=3)
    assert p == seed_sign_flip_test(means, resamples=2000, seed=3)
    assert 0 < p < 0.2


def test_t_interval_matches_the_formula_and_covers_the_truth():
    x = [0.1, 0.3, -0.05, 0.2, 0.15, 0.0]
    ci = t_interval(x)
    half = student_t.ppf(0.975, 5) * np.std(x, ddof=1) / math.sqrt(6)
    assert (ci.low, ci.high) == pytest.approx((np.mean(x) - half, np.mean(x) + half))
    assert t_interval([0.2]).low == -math.inf
    rng = np.random.default_rng(1)
    covered = np.mean([(lambda c: c.low <= 0.3 <= c.high)(t_interval(rng.normal(0.3, 1.0, 6))) for _ in range(2000)])
    assert covered == pytest.approx(0.95, abs=0.015)


def test_holm_adjusts_step_down_and_keeps_the_order():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]
    assert holm([0.2, 0.9, 0.01, 0.6]) == pytest.approx([0.6, 1.0, 0.04, 1.0])
    with pytest.raises(ValueError):
        holm([1.2])


def test_the_task_level_test_rejects_too_often_and_the_seed_level_test_does_not():
    """A/A comparisons whose runs vary: the old task-level test rejects well above 5 %, the
    comparisons' seed-level test at or below it."""
    rng = np.random.default_rng(11)
    rates = rejection_rates([synthetic_pair(rng, 6, 144, run_sd=0.3) for _ in range(150)], task_resamples=200)
    assert rates["task_level@0.05"] > 0.08
    assert rates["seed_sign_flip@0.05"] <= 0.06
    assert rates["t_interval_coverage_95"] >= 0.9


def test_the_seed_level_test_finds_a_planted_effect():
    rng = np.random.default_rng(2)
    diffs = {s: rng.normal(0.1 + rng.normal(0, 0.02), 0.4, 144) for s in range(8)}
    out = seed_paired(diffs)
    assert out.p_value <= 2 / 2 ** 8 + 1e-12
    assert out.difference.low > 0
    assert task_level_sign_flip_test(diffs, resamples=200) < 0.01


def test_variance_components_recover_simulated_ones():
    rng = np.random.default_rng(5)
    diffs = {s: rng.normal(rng.normal(0, 0.2), 0.5, size=400) for s in range(60)}
    vc = variance_components(diffs)
    assert vc.within_seed == pytest.approx(0.25, rel=0.05)
    assert vc.between_seed == pytest.approx(0.04, rel=0.4)
    assert vc.seed_mean_variance(400) == pytest.approx(vc.between_seed + vc.within_seed / 400)


def test_mde_uses_t_quantiles_the_seed_level_variance_and_the_family():
    vc = VarianceComponents(0.01, 0.5, 6, 144)
    q = student_t.ppf(0.975, 5) + student_t.ppf(0.8, 5)
    assert minimal_detectable_effect(vc, 6, 144) == pytest.approx(q * math.sqrt((0.01 + 0.5 / 144) / 6))
    # Four comparisons in the family: alpha / 4 per test, a larger MDE.
    q4 = student_t.ppf(1 - 0.05 / 8, 5) + student_t.ppf(0.8, 5)
    assert minimal_detectable_effect(vc, 6, 144, family=4) == pytest.approx(q4 * math.sqrt((0.01 + 0.5 / 144) / 6))
    assert minimal_detectable_effect(binomial_default_variance(0.5), 1, 144) == math.inf
    # seeds_for_mde is the first seed count that reaches the target.
    s = seeds_for_mde(vc, 144, 0.05)
    assert minimal_detectable_effect(vc, s, 144) <= 0.05 < minimal_detectable_effect(vc, s - 1, 144)


def test_mde_is_the_effect_the_seed_level_test_detects_80_percent_of_the_time():
    rng = np.random.default_rng(6)
    seeds, tasks, between, within = 10, 50, 0.01, 0.25
    mde = minimal_detectable_effect(VarianceComponents(between, within, 0, 0), seeds, tasks)
    hits = 0
    for _ in range(300):
        diffs = {s: rng.normal(mde + rng.normal(0, math.sqrt(between)), math.sqrt(within), tasks)
                 for s in range(seeds)}
        hits += seed_paired(diffs).p_value <= 0.05
    assert 0.65 <= hits / 300 <= 0.92


def test_seed_paired_counts_and_bad_input():
    out = seed_paired({0: [1, 0, -1, 1], 1: [0, 1, 1, 0]})
    assert (out.seeds, out.tasks, out.rose, out.fell) == (2, 8, 4, 1)
    assert out.difference.mean == pytest.approx((0.25 + 0.5) / 2)
    assert out.seed_means == {"0": 0.25, "1": 0.5}
    with pytest.raises(ValueError, match="at least one seed"):
        seed_paired({})
    with pytest.raises(ValueError, match="finite"):
        seed_sign_flip_test([float("nan")])
    with pytest.raises(ValueError, match="rate"):
        binomial_default_variance(1.5)
