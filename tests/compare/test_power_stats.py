"""The pooled paired analysis of ``curriculum.stats``: sign-flip test, hierarchical bootstrap, MDE."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from curriculum.stats import (VarianceComponents, binomial_default_variance, hierarchical_bootstrap_ci,
                              mean_of_seed_means, minimal_detectable_effect, pooled_paired,
                              stratified_sign_flip_test, variance_components)


def _binary_arms(rng, seeds, tasks, p_a, p_b, seed_sd=0.0):
    """Paired per-task differences of two pass/fail arms with per-seed rate shifts."""
    out = {}
    for s in range(seeds):
        shift = rng.normal(0.0, seed_sd)
        a = rng.random(tasks) < np.clip(p_a + shift, 0, 1)
        b = rng.random(tasks) < np.clip(p_b + shift, 0, 1)
        out[s] = a.astype(float) - b.astype(float)
    return out


def test_sign_flip_detects_a_planted_effect():
    rng = np.random.default_rng(1)
    diffs = _binary_arms(rng, seeds=6, tasks=144, p_a=0.45, p_b=0.30)
    assert stratified_sign_flip_test(diffs, resamples=2000, seed=0) < 0.01


def test_sign_flip_p_values_are_uniform_under_the_null():
    rng = np.random.default_rng(2)
    ps = np.array([stratified_sign_flip_test(_binary_arms(rng, 4, 40, 0.3, 0.3), resamples=400, seed=k)
                   for k in range(150)])
    # Uniform on (0, 1]: about 5% below 0.05 and a mean near 1/2 (binomial / CLT slack).
    assert (ps < 0.05).mean() < 0.12
    assert 0.40 < ps.mean() < 0.60
    assert (ps < 0.5).mean() == pytest.approx(0.5, abs=0.15)


def test_sign_flip_p_value_is_never_zero_and_one_for_no_change():
    assert stratified_sign_flip_test({0: [1.0] * 50}, resamples=99) == pytest.approx(1 / 100)
    assert stratified_sign_flip_test({0: [0.0] * 10, 1: [0.0] * 10}, resamples=99) == 1.0


def test_hierarchical_bootstrap_covers_the_truth():
    truth, covered, trials = 0.1, 0, 60
    rng = np.random.default_rng(3)
    for k in range(trials):
        # Seed effects N(truth, 0.05²), task noise N(0, 0.4²).
        diffs = {s: rng.normal(truth + rng.normal(0, 0.05), 0.4, size=50) for s in range(8)}
        ci = hierarchical_bootstrap_ci(diffs, resamples=1000, seed=k)
        covered += ci.low <= truth <= ci.high
        assert ci.low <= ci.mean <= ci.high
    # A 95% interval (the percentile bootstrap is a little narrow at 8 seeds).
    assert covered / trials >= 0.85


def test_hierarchical_bootstrap_is_seeded_and_wider_with_seed_variance():
    rng = np.random.default_rng(4)
    quiet = {s: rng.normal(0.0, 0.3, size=60) for s in range(6)}
    noisy = {s: x + rng.normal(0.0, 0.3) for s, x in quiet.items()}
    a = hierarchical_bootstrap_ci(quiet, resamples=2000, seed=7)
    assert a == hierarchical_bootstrap_ci(quiet, resamples=2000, seed=7)
    b = hierarchical_bootstrap_ci(noisy, resamples=2000, seed=7)
    assert (b.high - b.low) > 1.5 * (a.high - a.low)
    assert a.mean == pytest.approx(mean_of_seed_means(quiet))


def test_variance_components_recover_simulated_ones():
    rng = np.random.default_rng(5)
    diffs = {s: rng.normal(rng.normal(0, 0.2), 0.5, size=400) for s in range(60)}
    vc = variance_components(diffs)
    assert vc.within_seed == pytest.approx(0.25, rel=0.05)
    assert vc.between_seed == pytest.approx(0.04, rel=0.4)


def test_mde_matches_the_closed_form_for_the_binomial_default():
    # σ²_b = 0, σ²_w = 2·½·½ = ½: MDE = (z_.975 + z_.8) · sqrt(½ / (S·n)).
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    assert z == pytest.approx(2.80159, abs=1e-5)
    got = minimal_detectable_effect(binomial_default_variance(0.5), seeds=6, tasks=144)
    assert got == pytest.approx(z * np.sqrt(0.5 / 864))
    assert got == pytest.approx(0.06739, abs=1e-4)
    # A seed component adds σ²_b / S; more seeds shrink it, more tasks do not.
    vc = VarianceComponents(0.01, 0.5, 6, 144)
    assert minimal_detectable_effect(vc, 6, 144) == pytest.approx(z * np.sqrt(0.01 / 6 + 0.5 / 864))
    assert minimal_detectable_effect(vc, 6, 10**6) > z * np.sqrt(0.01 / 6) * 0.999


def test_mde_is_the_effect_the_test_detects_80_percent_of_the_time():
    rng = np.random.default_rng(6)
    sd, seeds, tasks = 0.5, 4, 50
    mde = minimal_detectable_effect(VarianceComponents(0.0, sd**2, 0, 0), seeds, tasks)
    hits = sum(stratified_sign_flip_test({s: rng.normal(mde, sd, tasks) for s in range(seeds)},
                                         resamples=300, seed=k) < 0.05 for k in range(100))
    assert 0.65 <= hits / 100 <= 0.93


def test_pooled_paired_counts_and_bad_input():
    out = pooled_paired({0: [1, 0, -1, 1], 1: [0, 1, 1, 0]}, resamples=200)
    assert (out.seeds, out.tasks, out.rose, out.fell) == (2, 8, 4, 1)
    assert out.difference.mean == pytest.approx((0.25 + 0.5) / 2)
    with pytest.raises(ValueError, match="at least one seed"):
        pooled_paired({})
    with pytest.raises(ValueError, match="finite"):
        stratified_sign_flip_test({0: [float("nan")]})
    with pytest.raises(ValueError, match="rate"):
        binomial_default_variance(1.5)
