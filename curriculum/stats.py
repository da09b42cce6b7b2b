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

Pooled paired analysis over seeds and tasks (``curriculum compare``'s primary comparison). Two
arms A and B run on the same seeds s = 1..S; on seed s both are evaluated on the same tasks
t ∈ T_s (n_s = |T_s|), and d_{s,t} = y^A_{s,t} − y^B_{s,t} is the per-task paired outcome.

* The estimate is the mean of the seed means, θ̂ = (1/S) Σ_s d̄_s with d̄_s = (1/n_s) Σ_t d_{s,t}
  (every seed weighs the same; with equal n_s it is the grand mean of all d_{s,t}).
* ``stratified_sign_flip_test`` — the permutation test stratified by seed: under H0 ("within
  each seed, which arm a task's outcome came from does not matter") the two labels of every
  (s, t) pair are exchangeable inside seed s, i.e. d_{s,t} ↦ ε_{s,t} d_{s,t} with independent
  signs ε = ±1. With θ*_b = (1/S) Σ_s (1/n_s) Σ_t ε^b_{s,t} d_{s,t} for B random sign draws,
  the two-sided p-value is p = (1 + #{b : |θ*_b| ≥ |θ̂|}) / (B + 1) (never 0, valid at any B).
  Pairs with d_{s,t} = 0 flip to themselves and only dilute θ̂ and θ* alike.
* ``hierarchical_bootstrap_ci`` — the two-stage bootstrap: draw S seeds with replacement, then
  within each drawn seed s draw n_s of its tasks with replacement, and compute θ* on the
  resample; the (1 − α) interval is the α/2 and 1 − α/2 quantiles of B such θ*. It keeps both
  the seed-to-seed and the task-to-task variation of θ̂.
* ``variance_components`` — the one-way random-effects split of the d_{s,t}:
  σ²_w = pooled within-seed variance Σ_s Σ_t (d_{s,t} − d̄_s)² / Σ_s (n_s − 1), and
  σ²_b = max(0, Var_s(d̄_s) − σ²_w / n̄) with Var_s the sample variance (ddof 1) of the seed
  means and n̄ the mean task count, so that Var(θ̂) ≈ σ²_b / S + σ²_w / (S·n).
* ``minimal_detectable_effect`` — the smallest true θ a two-sided level-α test of θ = 0 detects
  with probability ``power`` under the normal approximation:
  MDE = (z_{1−α/2} + z_{power}) · sqrt(σ²_b / S + σ²_w / (S·n)), z_q the standard normal
  quantile (α = 0.05, power 0.8: z-sum = 1.95996 + 0.84162 = 2.80159).
* ``binomial_default_variance(p)`` — the stated default when no pilot exists: two arms' pass/fail
  outcomes on a task, independent with success rate p each, give Var(d) = 2 p (1 − p) (its
  maximum 0.5 at p = ½), with no seed component (σ²_b = 0). Real arms share task difficulty,
  which makes their outcomes positively correlated and the true variance smaller, so this MDE
  errs on the large (cautious) side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from statistics import NormalDist

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


# --------------------------------------------------------------------------------------------
# pooled paired analysis over seeds and tasks (module docstring, second part)
# --------------------------------------------------------------------------------------------

def _strata(diffs: dict[Any, Sequence[float]]) -> list[np.ndarray]:
    strata = [np.asarray(v, dtype=float) for _, v in sorted(diffs.items(), key=lambda kv: str(kv[0]))]
    if not strata or any(x.ndim != 1 or x.size == 0 for x in strata):
        raise ValueError("need at least one seed, each with a non-empty 1-D sequence of paired differences")
    if any(not np.isfinite(x).all() for x in strata):
        raise ValueError("paired differences must be finite numbers")
    return strata


def mean_of_seed_means(diffs: dict[Any, Sequence[float]]) -> float:
    """θ̂ = (1/S) Σ_s d̄_s for ``diffs`` = {seed: per-task paired differences d_{s,·}}."""
    return float(np.mean([x.mean() for x in _strata(diffs)]))


def stratified_sign_flip_test(diffs: dict[Any, Sequence[float]], *, resamples: int = DEFAULT_RESAMPLES,
                              seed: int = 0) -> float:
    """Two-sided p-value of the seed-stratified sign-flip (paired permutation) test of θ = 0:
    p = (1 + #{b : |θ*_b| ≥ |θ̂|}) / (B + 1), θ*_b from independent signs ε_{s,t} = ±1 (module
    docstring). ``diffs`` maps seed → that seed's per-task differences d_{s,t}."""
    strata = _strata(diffs)
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    observed = abs(float(np.mean([x.mean() for x in strata])))
    rng = np.random.default_rng(seed)
    total = np.zeros(resamples)
    for x in strata:
        signs = rng.integers(0, 2, size=(resamples, x.size)) * 2 - 1
        total += (signs * x).mean(axis=1)
    flipped = np.abs(total / len(strata))
    # A tolerance so that resamples equal to the observed value up to float rounding count.
    hits = int((flipped >= observed - 1e-12 * max(1.0, observed)).sum())
    return (1 + hits) / (resamples + 1)


def hierarchical_bootstrap_ci(diffs: dict[Any, Sequence[float]], *, alpha: float = 0.05,
                              resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Interval:
    """θ̂ with its two-stage bootstrap (1 − alpha) interval: seeds with replacement, then tasks
    with replacement within each drawn seed (module docstring). ``Interval.n`` = seeds."""
    strata = _strata(diffs)
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie in (0, 1)")
    estimate = float(np.mean([x.mean() for x in strata]))
    rng = np.random.default_rng(seed)
    n_seeds = len(strata)
    # Stage 2 first, per seed: B resampled task means of every seed; stage 1 then picks seeds.
    task_means = np.stack([x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
                           for x in strata], axis=1)  # (B, S)
    picks = rng.integers(0, n_seeds, size=(resamples, n_seeds))
    thetas = np.take_along_axis(task_means, picks, axis=1).mean(axis=1)
    low, high = np.quantile(thetas, [alpha / 2, 1 - alpha / 2])
    return Interval(estimate, float(low), float(high), n_seeds)


@dataclass(frozen=True)
class VarianceComponents:
    """The one-way random-effects split of paired differences (module docstring)."""

    between_seed: float
    """σ²_b: variance of the true per-seed effect."""
    within_seed: float
    """σ²_w: variance of a task's difference around its seed's mean."""
    seeds: int
    tasks_per_seed: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def variance_components(diffs: dict[Any, Sequence[float]]) -> VarianceComponents:
    """σ²_b and σ²_w of ``diffs`` = {seed: d_{s,·}} (module docstring; one seed: σ²_b = 0)."""
    strata = _strata(diffs)
    dof = sum(x.size - 1 for x in strata)
    within = float(sum(((x - x.mean()) ** 2).sum() for x in strata) / dof) if dof > 0 else 0.0
    n_bar = float(np.mean([x.size for x in strata]))
    between = 0.0
    if len(strata) > 1:
        between = max(0.0, float(np.var([x.mean() for x in strata], ddof=1)) - within / n_bar)
    return VarianceComponents(between, within, len(strata), n_bar)


def binomial_default_variance(rate: float = 0.5) -> VarianceComponents:
    """The stated no-pilot default: σ²_w = 2 p (1 − p), σ²_b = 0 (module docstring)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError("the success rate must lie in [0, 1]")
    return VarianceComponents(0.0, 2.0 * rate * (1.0 - rate), 0, 0.0)


def minimal_detectable_effect(components: VarianceComponents, seeds: int, tasks: int, *,
                              alpha: float = 0.05, power: float = 0.8) -> float:
    """MDE = (z_{1−α/2} + z_{power}) · sqrt(σ²_b / S + σ²_w / (S·n)) for S ``seeds`` and n
    ``tasks`` per seed (two-sided level-α test, normal approximation; module docstring)."""
    if seeds < 1 or tasks < 1:
        raise ValueError("the design needs at least one seed and one task")
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError("alpha and power must lie in (0, 1)")
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return float(z * np.sqrt(components.between_seed / seeds + components.within_seed / (seeds * tasks)))


@dataclass(frozen=True)
class PooledPaired:
    """``pooled_paired``'s result for arms a − b."""

    seeds: int
    tasks: int
    """Paired (seed, task) outcomes in all."""
    difference: Interval
    """θ̂ with its hierarchical bootstrap interval."""
    p_value: float
    """Seed-stratified sign-flip test of θ = 0, two-sided."""
    rose: int
    fell: int
    components: VarianceComponents

    def to_dict(self) -> dict[str, Any]:
        return {"seeds": self.seeds, "tasks": self.tasks, "difference": self.difference.to_dict(),
                "p_value": self.p_value, "rose": self.rose, "fell": self.fell,
                "variance": self.components.to_dict()}


def pooled_paired(diffs: dict[Any, Sequence[float]], *, alpha: float = 0.05,
                  resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> PooledPaired:
    """Estimate, hierarchical bootstrap interval, stratified sign-flip p-value and variance
    components of ``diffs`` = {seed: per-task differences}, all with the same resampling seed."""
    strata = _strata(diffs)
    return PooledPaired(
        seeds=len(strata), tasks=int(sum(x.size for x in strata)),
        difference=hierarchical_bootstrap_ci(diffs, alpha=alpha, resamples=resamples, seed=seed),
        p_value=stratified_sign_flip_test(diffs, resamples=resamples, seed=seed),
        rose=int(sum((x > 0).sum() for x in strata)), fell=int(sum((x < 0).sum() for x in strata)),
        components=variance_components(diffs))
