"""Bootstrap statistics for engineer benchmarks.

Every benchmark number is a mean over seeds. With n seeds and values x_1..x_n:

* ``bootstrap_mean_ci(x)`` — the mean x̄ and a percentile-bootstrap (1 − α) interval:
  draw B resamples x*_b of size n with replacement, take their means m_b, and report the
  α/2 and 1 − α/2 empirical quantiles of (m_1..m_B).
* ``paired_difference(a, b)`` — two paired samples: d_i = a_i − b_i, and the result is the
  mean d̄ with the bootstrap interval of the mean of d (``paired_tasks`` uses it over tasks).

* ``paired_tasks(a, b)`` — two evals of the same tasks (``EvalReport.task_scores``): on the
  tasks both have, d_t = a_t − b_t; the mean d̄ with its bootstrap interval over tasks, how many
  tasks rose and fell, and an exact two-sided sign test on the tasks that changed
  (p = P(Binomial(rose + fell, ½) at least as far from its mean as the count that rose)).

The resampling RNG is seeded, so the same inputs give the same interval. With one value the
interval collapses to that value.

Paired analysis at the level of seeds (``curriculum compare``'s primary comparison). Two arms A
and B run on the same seeds s = 1..S; on seed s both are evaluated on the same tasks t ∈ T_s
(n_s = |T_s|; in practice the same suite for every seed: tasks are crossed with seeds), and
d_{s,t} = y^A_{s,t} − y^B_{s,t} is the per-task paired outcome. The unit that is replicated is the
training run: under "the arm makes no difference" a run is better or worse on many tasks at once,
so only whole seeds are exchangeable, and every test and interval here works on the seed means.

* ``seed_means`` — d̄_s = (1/n_s) Σ_t d_{s,t}, one number per seed; the estimate is
  θ̂ = (1/S) Σ_s d̄_s (every seed weighs the same).
* ``seed_sign_flip_test`` — the exact paired permutation test over seeds: under H0 the labels of
  the two runs of a seed are exchangeable, i.e. d̄_s ↦ ε_s d̄_s with ε_s = ±1. For S ≤ 16 all 2^S
  sign vectors are enumerated and p = #{ε : |mean(ε d̄)| ≥ |θ̂|} / 2^S (the smallest possible p
  is 2 / 2^S: S = 6 gives 0.031, S = 10 gives 0.002); above, B random sign vectors give
  p = (1 + #{b : |θ*_b| ≥ |θ̂|}) / (B + 1).
* ``t_interval`` — θ̂ ± t_{1−α/2, S−1} · sd(d̄) / √S, the t-interval with S − 1 degrees of freedom.
* ``holm`` — Holm's step-down adjustment of a family of m p-values: sort p_(1) ≤ … ≤ p_(m),
  p̃_(i) = max_{j ≤ i} min(1, (m − j + 1) p_(j)); it controls the family-wise error at α.
* ``variance_components`` — the one-way random-effects split of the d_{s,t}:
  σ²_w = pooled within-seed variance Σ_s Σ_t (d_{s,t} − d̄_s)² / Σ_s (n_s − 1), and
  σ²_b = max(0, Var_s(d̄_s) − σ²_w / n̄) with Var_s the sample variance (ddof 1) of the seed
  means and n̄ the mean task count, so that Var(d̄_s) ≈ σ²_b + σ²_w / n: the variance of the
  seed-level test's unit, rescalable to another task count n.
* ``minimal_detectable_effect`` — the smallest true θ that the two-sided level-α seed-level test
  detects with probability ``power`` (the one-sample t approximation with S − 1 degrees of
  freedom): MDE = (t_{1−α/2, S−1} + t_{power, S−1}) · sqrt((σ²_b + σ²_w / n) / S). For a family
  of m primary comparisons α is replaced by α / m (Bonferroni, which Holm never exceeds), so the
  MDE holds for the adjusted test. ``seeds_for_mde`` inverts it: the fewest S with MDE ≤ a target.
* ``binomial_default_variance(p)`` — the stated default when no pilot exists: two arms' pass/fail
  outcomes on a task, independent with success rate p each, give Var(d) = 2 p (1 − p) (its
  maximum 0.5 at p = ½), with no seed component (σ²_b = 0). Real arms share task difficulty,
  which makes their outcomes positively correlated (smaller variance), while real runs add a
  seed component (larger): a pilot's components replace it as soon as one exists.
* ``task_level_sign_flip_test`` — the test that flips single tasks inside each seed. It treats
  tasks as independent replicates, which they are not (the A/A calibration in
  ``benchmarks/stats_calibration.py`` rejects above α with it); it is kept only so the
  calibration can show that, and is never a comparison's test.

A post-hoc MDE (from the comparison it then interprets) is a planning number for the next design,
never evidence that an effect is absent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import math

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
# paired analysis at the level of seeds (module docstring, second part)
# --------------------------------------------------------------------------------------------

EXACT_SIGN_FLIP_SEEDS = 16
"""Up to this many seeds the sign-flip test enumerates all 2^S sign vectors (exact p)."""


def _strata(diffs: dict[Any, Sequence[float]]) -> list[np.ndarray]:
    strata = [np.asarray(v, dtype=float) for _, v in sorted(diffs.items(), key=lambda kv: str(kv[0]))]
    if not strata or any(x.ndim != 1 or x.size == 0 for x in strata):
        raise ValueError("need at least one seed, each with a non-empty 1-D sequence of paired differences")
    if any(not np.isfinite(x).all() for x in strata):
        raise ValueError("paired differences must be finite numbers")
    return strata


def seed_means(diffs: dict[Any, Sequence[float]]) -> dict[Any, float]:
    """{seed: d̄_s} for ``diffs`` = {seed: per-task paired differences d_{s,·}}."""
    _strata(diffs)
    return {s: float(np.mean(np.asarray(v, dtype=float))) for s, v in sorted(diffs.items(), key=lambda kv: str(kv[0]))}


def _means_array(means: Sequence[float]) -> np.ndarray:
    x = np.asarray(means, dtype=float)
    if x.ndim != 1 or x.size == 0 or not np.isfinite(x).all():
        raise ValueError("need a non-empty 1-D sequence of finite seed means")
    return x


def seed_sign_flip_test(means: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> float:
    """Two-sided p-value of the sign-flip test over seeds of θ = 0 (module docstring): exact for up
    to ``EXACT_SIGN_FLIP_SEEDS`` seeds, Monte Carlo with ``resamples`` sign vectors above."""
    x = _means_array(means)
    observed = abs(float(x.mean()))
    tolerance = 1e-12 * max(1.0, observed)  # flips equal to θ̂ up to float rounding count as hits
    if x.size <= EXACT_SIGN_FLIP_SEEDS:
        codes = np.arange(2 ** x.size)[:, None] >> np.arange(x.size)[None, :]
        signs = (codes & 1) * 2 - 1  # (2^S, S), every sign vector once
        flipped = np.abs((signs * x).mean(axis=1))
        return float((flipped >= observed - tolerance).sum() / flipped.size)
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    signs = np.random.default_rng(seed).integers(0, 2, size=(resamples, x.size)) * 2 - 1
    hits = int((np.abs((signs * x).mean(axis=1)) >= observed - tolerance).sum())
    return (1 + hits) / (resamples + 1)


def t_interval(means: Sequence[float], *, alpha: float = 0.05) -> Interval:
    """θ̂ = mean of ``means`` with its t-interval over seeds (S − 1 degrees of freedom). With one
    seed the interval is unbounded (±inf): one run says nothing about run-to-run variation."""
    from scipy.stats import t as student_t

    x = _means_array(means)
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie in (0, 1)")
    mean = float(x.mean())
    if x.size == 1:
        return Interval(mean, -math.inf, math.inf, 1)
    half = float(student_t.ppf(1 - alpha / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return Interval(mean, mean - half, mean + half, int(x.size))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values of a family, in the input order (module docstring)."""
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1 or ((p < 0) | (p > 1) | ~np.isfinite(p)).any():
        raise ValueError("p-values must be a 1-D sequence of numbers in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return [float(v) for v in out]


def task_level_sign_flip_test(diffs: dict[Any, Sequence[float]], *, resamples: int = DEFAULT_RESAMPLES,
                              seed: int = 0) -> float:
    """Two-sided p of the sign-flip test that flips single tasks inside each seed (independent
    ε_{s,t} = ±1). Anti-conservative when runs vary (module docstring): calibration only."""
    strata = _strata(diffs)
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    observed = abs(float(np.mean([x.mean() for x in strata])))
    rng = np.random.default_rng(seed)
    total = np.zeros(resamples)
    for x in strata:
        signs = rng.integers(0, 2, size=(resamples, x.size)) * 2 - 1
        total += (signs * x).mean(axis=1)
    hits = int((np.abs(total / len(strata)) >= observed - 1e-12 * max(1.0, observed)).sum())
    return (1 + hits) / (resamples + 1)


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

    def seed_mean_variance(self, tasks: int) -> float:
        """Var(d̄_s) ≈ σ²_b + σ²_w / n for n ``tasks`` per seed: the seed-level test's unit."""
        return self.between_seed + self.within_seed / tasks


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
                              alpha: float = 0.05, power: float = 0.8, family: int = 1) -> float:
    """MDE = (t_{1−α'/2, S−1} + t_{power, S−1}) · sqrt((σ²_b + σ²_w / n) / S), α' = α / ``family``,
    for S ``seeds`` and n ``tasks`` per seed (module docstring). ``inf`` for one seed."""
    from scipy.stats import t as student_t

    if seeds < 1 or tasks < 1 or family < 1:
        raise ValueError("the design needs at least one seed, one task and one comparison")
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError("alpha and power must lie in (0, 1)")
    if seeds == 1:
        return math.inf
    df = seeds - 1
    quantiles = student_t.ppf(1 - alpha / family / 2, df) + student_t.ppf(power, df)
    return float(quantiles * math.sqrt(components.seed_mean_variance(tasks) / seeds))


def seeds_for_mde(components: VarianceComponents, tasks: int, target: float, *, alpha: float = 0.05,
                  power: float = 0.8, family: int = 1, most: int = 10_000) -> int | None:
    """The fewest seeds S ≥ 2 with ``minimal_detectable_effect`` ≤ ``target`` (``None`` if even
    ``most`` seeds do not reach it)."""
    if target <= 0:
        raise ValueError("the target MDE must be positive")
    low, high = 2, most
    if minimal_detectable_effect(components, high, tasks, alpha=alpha, power=power, family=family) > target:
        return None
    while low < high:  # the MDE falls with S: bisect for the first S that reaches the target
        mid = (low + high) // 2
        if minimal_detectable_effect(components, mid, tasks, alpha=alpha, power=power, family=family) <= target:
            high = mid
        else:
            low = mid + 1
    return low


@dataclass(frozen=True)
class SeedPaired:
    """``seed_paired``'s result for arms a − b (or final − start)."""

    seeds: int
    tasks: int
    """Paired (seed, task) outcomes in all."""
    difference: Interval
    """θ̂ with its t-interval over seeds (S − 1 degrees of freedom)."""
    p_value: float
    """Sign-flip test over seeds of θ = 0, two-sided, unadjusted."""
    seed_means: dict[str, float]
    """d̄_s of every seed."""
    rose: int
    """Tasks (over all seeds) whose outcome is higher in a: a description, not a test."""
    fell: int
    components: VarianceComponents

    def to_dict(self) -> dict[str, Any]:
        return {"seeds": self.seeds, "tasks": self.tasks, "difference": self.difference.to_dict(),
                "interval": "t over seed means, S - 1 degrees of freedom",
                "p_value": self.p_value, "test": "sign-flip over seeds (exact up to 16 seeds)",
                "seed_means": self.seed_means, "rose": self.rose, "fell": self.fell,
                "variance": self.components.to_dict()}


def seed_paired(diffs: dict[Any, Sequence[float]], *, alpha: float = 0.05,
                resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> SeedPaired:
    """Estimate, t-interval and sign-flip p over seeds, the task-level rose/fell description and
    the variance components of ``diffs`` = {seed: per-task differences}."""
    strata = _strata(diffs)
    means = seed_means(diffs)
    values = list(means.values())
    return SeedPaired(
        seeds=len(strata), tasks=int(sum(x.size for x in strata)),
        difference=t_interval(values, alpha=alpha),
        p_value=seed_sign_flip_test(values, resamples=resamples, seed=seed),
        seed_means={str(k): v for k, v in means.items()},
        rose=int(sum((x > 0).sum() for x in strata)), fell=int(sum((x < 0).sum() for x in strata)),
        components=variance_components(diffs))


def pairwise_differences(finals: dict[str, dict[int, float]], *, alpha: float = 0.05) -> list[dict[str, Any]]:
    """For every ordered pair (a, b), a before b in ``finals``' order: final_a − final_b on the seeds
    both have (``finals``: engineer → {seed: final score}), with its t-interval and sign-flip p
    over seeds and the Holm-adjusted p over all pairs (exploratory: no pair was declared in
    advance). Returns JSON-able rows ``{"a", "b", "mean_diff", "ci95_low", "ci95_high",
    "p_value", "p_holm", "n", "seeds"}``."""
    names = list(finals)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            seeds = sorted(set(finals[a]) & set(finals[b]))
            if not seeds:
                continue
            d = [finals[a][s] - finals[b][s] for s in seeds]
            ci = t_interval(d, alpha=alpha)
            rows.append({"a": a, "b": b, "mean_diff": ci.mean, "ci95_low": ci.low, "ci95_high": ci.high,
                         "p_value": seed_sign_flip_test(d), "n": len(seeds), "seeds": seeds})
    for row, p in zip(rows, holm([r["p_value"] for r in rows]) if rows else []):
        row["p_holm"] = p
    return rows
