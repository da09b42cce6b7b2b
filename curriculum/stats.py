"""Bootstrap statistics for engineer benchmarks.

Every benchmark number is a mean over seeds. With n seeds and values x_1..x_n:

* ``bootstrap_mean_ci(x)`` — the mean x̄ and a percentile-bootstrap (1 − α) interval:
  draw B resamples x*_b of size n with replacement, take their means m_b, and report the
  α/2 and 1 − α/2 empirical quantiles of (m_1..m_B).
* ``paired_difference(a, b)`` — engineers run on identical seeds, so runs pair up by seed:
  d_i = a_i − b_i, and the result is the mean d̄ with the bootstrap interval of the mean of d.
  An interval that excludes 0 says the difference is larger than the seed-to-seed noise
  (at n = 5 seeds such intervals are wide; read them as a guide, not a test).

* ``paired_tasks(a, b)`` — two evals of the same tasks (``EvalReport.task_scores``): on the
  tasks both have, d_t = a_t − b_t; the mean d̄ with its bootstrap interval over tasks, how many
  tasks rose and fell, and an exact two-sided sign test on the tasks that changed
  (p = P(Binomial(rose + fell, ½) at least as far from its mean as the count that rose)).

The resampling RNG is seeded, so the same inputs give the same interval. With one value the
interval collapses to that value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

DEFAULT_RESAMPLES = 10_000
"""Bootstrap resamples B (the percentile interval's Monte-Carlo error is ~1/sqrt(B))."""


@dataclass(frozen=True)
class Interval:
    """A mean with its (1 − α) bootstrap interval."""

    mean: float
    low: float
    high: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap_mean_ci(values: Sequence[float], *, alpha: float = 0.05,
                      resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Interval:
    """Mean of ``values`` and its percentile-bootstrap (1 − alpha) interval."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("need a non-empty 1-D sequence of values")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie in (0, 1)")
    mean = float(x.mean())
    if x.size == 1:
        return Interval(mean, mean, mean, 1)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    means = x[idx].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return Interval(mean, float(low), float(high), int(x.size))


def bootstrap_mean_ci_columns(matrix: np.ndarray, *, alpha: float = 0.05,
                              resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[Interval]:
    """``bootstrap_mean_ci`` of each column of a (seeds × points) matrix, ignoring NaNs."""
    m = np.asarray(matrix, dtype=float)
    out = []
    for j in range(m.shape[1]):
        column = m[:, j][~np.isnan(m[:, j])]
        out.append(bootstrap_mean_ci(column, alpha=alpha, resamples=resamples, seed=seed)
                   if column.size else Interval(float("nan"), float("nan"), float("nan"), 0))
    return out


def paired_difference(a: Sequence[float], b: Sequence[float], *, alpha: float = 0.05,
                      resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Interval:
    """Mean of a_i − b_i over paired seeds with its bootstrap interval."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.shape != xb.shape:
        raise ValueError(f"paired samples must have equal length ({xa.size} vs {xb.size})")
    return bootstrap_mean_ci(xa - xb, alpha=alpha, resamples=resamples, seed=seed)


def pairwise_differences(finals: dict[str, dict[int, float]], *, alpha: float = 0.05,
                         resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[dict[str, Any]]:
    """For every ordered pair (a, b), a before b in ``finals``' order: a − b on the seeds both have.

    ``finals`` maps engineer → {seed: final score}. Returns JSON-able rows
    ``{"a", "b", "mean_diff", "ci95_low", "ci95_high", "n", "seeds"}``.
    """
    names = list(finals)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            seeds = sorted(set(finals[a]) & set(finals[b]))
            if not seeds:
                continue
            diff = paired_difference([finals[a][s] for s in seeds], [finals[b][s] for s in seeds],
                                     alpha=alpha, resamples=resamples, seed=seed)
            rows.append({"a": a, "b": b, "mean_diff": diff.mean, "ci95_low": diff.low,
                         "ci95_high": diff.high, "n": diff.n, "seeds": seeds})
    return rows


@dataclass(frozen=True)
class PairedTasks:
    """``paired_tasks``'s result: b → a on the tasks both evals share."""

    tasks: int
    rose: int
    """Tasks whose score is higher in ``a`` (for pass/fail tasks: gained)."""
    fell: int
    """Tasks whose score is lower in ``a`` (lost)."""
    difference: Interval
    """Mean of a_t − b_t with its bootstrap interval over tasks."""
    sign_test_p: float
    """Exact two-sided sign test on the tasks that changed (1.0 when none changed)."""

    def line(self) -> str:
        d = self.difference
        return (f"{self.tasks} shared tasks: {100 * d.mean:+.1f} points [{100 * d.low:+.1f}, {100 * d.high:+.1f}] "
                f"(95% bootstrap over tasks); {self.rose} rose, {self.fell} fell; sign test p = {self.sign_test_p:.3g}")


def sign_test(rose: int, fell: int) -> float:
    """Exact two-sided sign-test p-value for ``rose`` ups against ``fell`` downs."""
    from math import comb

    n = rose + fell
    if n == 0:
        return 1.0
    k = min(rose, fell)
    tail = sum(comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_tasks(a: dict[str, float], b: dict[str, float], *, alpha: float = 0.05,
                 resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> PairedTasks:
    """Compare two evals task by task (module docstring); ``ValueError`` if they share no task."""
    shared = sorted(set(a) & set(b))
    if not shared:
        raise ValueError("the two evals share no task id (different suites, seeds or testbeds?)")
    xa = np.array([a[t] for t in shared], dtype=float)
    xb = np.array([b[t] for t in shared], dtype=float)
    rose, fell = int((xa > xb).sum()), int((xa < xb).sum())
    diff = paired_difference(xa, xb, alpha=alpha, resamples=resamples, seed=seed)
    return PairedTasks(len(shared), rose, fell, diff, sign_test(rose, fell))
