"""Calibration of ``curriculum compare``'s test: how often it rejects when nothing differs (A/A).

A test at level α should reject a true null in at most α of comparisons, and a 95 % interval should
contain the true difference in 95 % of them. Two sources of A/A comparisons:

(a) **Synthetic**, with the structure of real comparisons: S seeds per arm, the same n pass/fail
    tasks for every run (tasks crossed with seeds). Task t has difficulty b_t ~ N(0, task_sd²);
    every run r (one arm, one seed) has its own effect u_r ~ N(0, run_sd²), the run-to-run variation
    of training; run r passes task t with probability sigmoid(base + b_t + u_r). Both arms draw
    from the same law, so the true difference is 0.
(b) **Committed**: every ``compare.json`` under ``docs/results`` that stores per-task outcomes.
    For each arm with at least 4 seeds, its seeds are split at random into two halves that play
    two arms (seed i of one half paired with seed j of the other): two runs of the *same* arm, so
    again the true difference is 0.

For each, it prints the rejection rate at α = 0.05 and 0.01 of the seed-level sign-flip test
(``curriculum.stats.seed_sign_flip_test``, the comparisons' test), of the t-interval's
implied test (interval excludes 0), and of the old task-level sign-flip test
(``curriculum.stats.task_level_sign_flip_test``), plus the coverage of the 95 % t-interval.
With few seeds the exact sign-flip test cannot reach small α at all (smallest p = 2 / 2^S): a
rate of 0 there says the test is conservative, not that it is powerful.

    python benchmarks/stats_calibration.py [--comparisons 2000] [--splits 400]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from curriculum.stats import seed_sign_flip_test, t_interval, task_level_sign_flip_test

ALPHAS = (0.05, 0.01)
RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"


def synthetic_pair(rng: np.random.Generator, seeds: int, tasks: int, *, base: float = -1.0,
                   task_sd: float = 1.5, run_sd: float = 0.5) -> dict[int, np.ndarray]:
    """One A/A comparison under model (a): {seed: per-task differences y^A − y^B}."""
    difficulty = rng.normal(0.0, task_sd, tasks)  # (n,) shared by every run
    runs = rng.normal(0.0, run_sd, (2, seeds, 1))  # (arm, S, 1): each run's own effect
    p = 1.0 / (1.0 + np.exp(-(base + difficulty[None, None, :] + runs)))  # (2, S, n)
    y = (rng.random(p.shape) < p).astype(float)
    return {s: y[0, s] - y[1, s] for s in range(seeds)}


def rejection_rates(comparisons: list[dict[int, np.ndarray]], *, task_resamples: int = 400) -> dict[str, float]:
    """For a list of A/A comparisons: each test's rejection rate at every α in ``ALPHAS`` and the
    95 % t-interval's coverage of 0."""
    seed_p, task_p, covered, t_reject = [], [], [], {a: [] for a in ALPHAS}
    for k, diffs in enumerate(comparisons):
        means = [float(np.mean(v)) for v in diffs.values()]
        seed_p.append(seed_sign_flip_test(means))
        task_p.append(task_level_sign_flip_test(diffs, resamples=task_resamples, seed=k))
        for a in ALPHAS:
            ci = t_interval(means, alpha=a)
            t_reject[a].append(not ci.low <= 0.0 <= ci.high)
        ci95 = t_interval(means, alpha=0.05)
        covered.append(ci95.low <= 0.0 <= ci95.high)
    out: dict[str, float] = {"comparisons": len(comparisons)}
    for a in ALPHAS:
        out[f"seed_sign_flip@{a}"] = float(np.mean(np.array(seed_p) <= a))
        out[f"t_interval@{a}"] = float(np.mean(t_reject[a]))
        out[f"task_level@{a}"] = float(np.mean(np.array(task_p) <= a))
    out["t_interval_coverage_95"] = float(np.mean(covered))
    return out


def synthetic(comparisons: int, seeds: int, tasks: int, run_sd: float, seed: int = 0) -> dict[str, float]:
    """Rejection rates on ``comparisons`` synthetic A/A comparisons (model (a))."""
    rng = np.random.default_rng(seed)
    return rejection_rates([synthetic_pair(rng, seeds, tasks, run_sd=run_sd) for _ in range(comparisons)])


def committed_arms(root: Path = RESULTS) -> dict[str, dict[int, dict[str, float]]]:
    """``"<comparison>/<arm>"`` → {seed: final per-task outcomes} for every committed comparison."""
    arms: dict[str, dict[int, dict[str, float]]] = {}
    for file in sorted(root.glob("*/compare.json")):
        for row in json.loads(file.read_text()).get("runs", []):
            if row.get("task_scores"):
                key = f"{file.parent.name}/{row['engineer']}"
                arms.setdefault(key, {})[int(row["seed"])] = {str(k): float(v) for k, v in row["task_scores"].items()}
    return arms


def committed(splits: int, seed: int = 0, root: Path = RESULTS) -> dict[str, float]:
    """Rejection rates on A/A pairs of committed runs (model (b)): ``splits`` random halvings of
    every arm's seeds."""
    rng = np.random.default_rng(seed)
    comparisons = []
    for runs in committed_arms(root).values():
        seeds = sorted(runs)
        if len(seeds) < 4:
            continue
        half = len(seeds) // 2
        for _ in range(splits):
            order = rng.permutation(seeds)
            diffs = {}
            for i, (a, b) in enumerate(zip(order[:half], order[half:2 * half])):
                shared = sorted(set(runs[a]) & set(runs[b]))
                if shared:
                    diffs[i] = np.array([runs[a][t] - runs[b][t] for t in shared])
            if len(diffs) >= 2:
                comparisons.append(diffs)
    return rejection_rates(comparisons, task_resamples=200)


def print_rates(label: str, rates: dict[str, float]) -> None:
    print(f"{label}  ({int(rates['comparisons'])} A/A comparisons)")
    for a in ALPHAS:
        print(f"  false-positive rate at {a:g}: {rates[f'seed_sign_flip@{a}']:.3f}  (seed-level sign-flip, "
              f"the test compare uses)")
        print(f"    t-interval excludes 0 at {a:g}: {rates[f't_interval@{a}']:.3f};  task-level sign-flip "
              f"(not used): {rates[f'task_level@{a}']:.3f}")
    print(f"  coverage of the 95% t-interval: {rates['t_interval_coverage_95']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--comparisons", type=int, default=2000, help="synthetic A/A comparisons per setting")
    parser.add_argument("--splits", type=int, default=400, help="random seed halvings per committed arm")
    parser.add_argument("--tasks", type=int, default=144, help="tasks per run in the synthetic setting")
    args = parser.parse_args()
    for seeds in (6, 10):
        for run_sd in (0.0, 0.15, 0.5):
            print_rates(f"synthetic: {seeds} seeds x {args.tasks} tasks, run-to-run sd {run_sd} (logit)",
                        synthetic(args.comparisons, seeds, args.tasks, run_sd))
    print_rates(f"committed: seeds of one arm split in two halves, {args.splits} splits per arm "
                f"({len(committed_arms())} arms under docs/results)", committed(args.splits))


if __name__ == "__main__":
    main()
