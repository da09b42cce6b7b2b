"""Rank correlation between two learners' engineer orders (benchmarks/small_rank.py)."""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from benchmarks.small_rank import average_ranks, finals_of, kendall_tau_b, rank_correlation, spearman


def test_ranks_share_ties() -> None:
    assert average_ranks([0.3, 0.1, 0.3, 0.2]).tolist() == [3.5, 1.0, 3.5, 2.0]


@pytest.mark.parametrize("x,y", [([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]), ([0.1, 0.4, 0.4, 0.2, 0.9, 0.3],
                                                                     [0.2, 0.1, 0.3, 0.3, 0.5, 0.0])])
def test_matches_scipy(x: list[float], y: list[float]) -> None:
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic)
    assert kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y, variant="b").statistic)


def test_all_tied_is_undefined() -> None:
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert math.isnan(kendall_tau_b([1, 2, 3], [2, 2, 2]))


def test_identical_and_reversed_orders() -> None:
    a = {"e1": [0.1, 0.12, 0.11], "e2": [0.3, 0.31, 0.29], "e3": [0.5, 0.52, 0.5], "e4": [0.7, 0.71, 0.69]}
    same = rank_correlation(a, {k: [10 * v for v in vs] for k, vs in a.items()}, resamples=300)
    assert same["spearman"]["estimate"] == pytest.approx(1.0)
    assert same["kendall_tau_b"]["ci"] == [pytest.approx(1.0), pytest.approx(1.0)]  # separated: no crossings
    rev = rank_correlation(a, {k: [-v for v in vs] for k, vs in a.items()}, resamples=300)
    assert rev["spearman"]["estimate"] == pytest.approx(-1.0)
    assert rev["rank_a"]["e4"] == 1.0 and rev["rank_b"]["e1"] == 1.0


def test_noisy_scores_widen_the_interval() -> None:
    import numpy as np

    rng = np.random.default_rng(1)
    a = {f"e{i}": list(i * 0.01 + rng.normal(0, 0.2, 10)) for i in range(6)}
    b = {f"e{i}": list(i * 0.01 + rng.normal(0, 0.2, 10)) for i in range(6)}
    out = rank_correlation(a, b, resamples=500)
    lo, hi = out["spearman"]["ci"]
    assert lo < 0.0 < hi and hi - lo > 0.5


def test_only_shared_engineers_and_clear_errors(tmp_path) -> None:
    a = {"x": [1.0], "y": [2.0], "z": [3.0], "only_a": [9.0]}
    b = {"x": [1.0], "y": [3.0], "z": [2.0]}
    assert rank_correlation(a, b, resamples=10)["engineers"] == ["x", "y", "z"]
    with pytest.raises(ValueError, match="at least 3 engineers"):
        rank_correlation({"x": [1.0], "y": [2.0]}, {"x": [1.0], "y": [2.0]})
    with pytest.raises(ValueError, match="no scores"):
        rank_correlation({"x": [], "y": [2.0], "z": [1.0]}, b)
    path = tmp_path / "compare.json"
    path.write_text(json.dumps({"runs": [
        {"engineer": "x", "seed": 1, "complete": True, "final_score": 0.2},
        {"engineer": "x", "seed": 0, "complete": True, "final_score": 0.1},
        {"engineer": "y", "seed": 0, "complete": False, "final_score": 0.5}]}))
    assert finals_of(path) == {"x": [0.1, 0.2]}
    path.write_text(json.dumps({"finals": {"x": [0.3, 0.4]}}))
    assert finals_of(path) == {"x": [0.3, 0.4]}
    path.write_text(json.dumps({"table": []}))
    with pytest.raises(ValueError, match="neither"):
        finals_of(path)
