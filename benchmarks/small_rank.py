"""Do two learners order the engineers alike? Rank correlation of per-engineer final scores.

Input: for each learner, the per-seed final scores of every engineer (``compare.json``'s runs,
or any mapping engineer -> list of scores). On the engineers both learners ran, the point
estimate compares the engineers' mean final scores:

* Spearman's rho: Pearson correlation of the average ranks (ties get the mean of their ranks);
* Kendall's tau-b: (concordant − discordant) / sqrt((n0 − t_x)(n0 − t_y)) over all n0 = n(n−1)/2
  engineer pairs, t_x and t_y the pairs tied in x and in y.

Interval: percentile bootstrap over seeds. Each resample draws the seeds of each learner with
replacement, independently between learners; within a learner one draw of seed indices serves
every engineer (engineers share seeds, so their pairing is kept) when all engineers have the
same number of seeds, otherwise each engineer's seeds are drawn on their own. Resamples in
which a correlation is undefined (every engineer tied on one learner) are left out and counted.

Run: ``python benchmarks/small_rank.py --a small=docs/results/small_rank/compare.json
--b simulated=docs/results/small_rank_simulated/compare.json --out docs/results/small_rank/rank_correlation.json``
(``--b`` may be given several times; each is correlated with ``--a``).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def average_ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks 1..n of ``values`` (ascending), ties sharing the mean of their ranks."""
    x = np.asarray(values, dtype=float)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=float)
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho (nan when either side has every value tied)."""
    rx, ry = average_ranks(x), average_ranks(y)
    dx, dy = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return float(dx @ dy) / denom if denom > 0 else float("nan")


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b (nan when either side has every value tied)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    sx = np.sign(x[:, None] - x[None, :])
    sy = np.sign(y[:, None] - y[None, :])
    upper = np.triu_indices(len(x), k=1)
    sx, sy = sx[upper], sy[upper]
    denom = math.sqrt(float(np.count_nonzero(sx)) * float(np.count_nonzero(sy)))
    return float((sx * sy).sum()) / denom if denom > 0 else float("nan")


def _resample_means(scores: Mapping[str, Sequence[float]], names: list[str], rng: np.random.Generator) -> np.ndarray:
    lengths = {len(scores[e]) for e in names}
    if len(lengths) == 1:
        n = lengths.pop()
        pick = rng.integers(0, n, n)
        return np.array([float(np.mean(np.asarray(scores[e], dtype=float)[pick])) for e in names])
    return np.array([float(np.mean(rng.choice(np.asarray(scores[e], dtype=float), len(scores[e]))))
                     for e in names])


def rank_correlation(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]], *,
                     resamples: int = 4000, confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Spearman and Kendall tau-b between the engineers' mean scores on learners ``a`` and ``b``,
    each with a percentile-bootstrap interval over seeds (module docstring)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    names = [e for e in a if e in b]
    if len(names) < 3:
        raise ValueError(f"need at least 3 engineers scored on both learners, got {names}")
    for side, scores in (("a", a), ("b", b)):
        empty = [e for e in names if len(scores[e]) == 0]
        if empty:
            raise ValueError(f"learner {side} has no scores for {empty}")
    mean_a = np.array([float(np.mean(a[e])) for e in names])
    mean_b = np.array([float(np.mean(b[e])) for e in names])
    rng = np.random.default_rng([seed, 0x52414E4B])
    draws: dict[str, list[float]] = {"spearman": [], "kendall_tau_b": []}
    for _ in range(resamples):
        ra, rb = _resample_means(a, names, rng), _resample_means(b, names, rng)
        draws["spearman"].append(spearman(ra, rb))
        draws["kendall_tau_b"].append(kendall_tau_b(ra, rb))
    lo, hi = (1.0 - confidence) / 2.0, 1.0 - (1.0 - confidence) / 2.0
    out: dict[str, Any] = {"engineers": names, "mean_a": dict(zip(names, mean_a.tolist())),
                           "mean_b": dict(zip(names, mean_b.tolist())),
                           "rank_a": dict(zip(names, average_ranks(-mean_a).tolist())),
                           "rank_b": dict(zip(names, average_ranks(-mean_b).tolist())),
                           "resamples": resamples, "confidence": confidence}
    for key, fn in (("spearman", spearman), ("kendall_tau_b", kendall_tau_b)):
        vals = np.array(draws[key])
        ok = vals[~np.isnan(vals)]
        out[key] = {"estimate": fn(mean_a, mean_b),
                    "ci": [float(np.quantile(ok, lo)), float(np.quantile(ok, hi))] if len(ok) else [None, None],
                    "undefined_resamples": int(len(vals) - len(ok))}
    return out


def finals_of(compare_json: Path) -> dict[str, list[float]]:
    """engineer -> final scores of its complete runs, in seed order, from a ``compare.json`` (or
    from a JSON file ``{"finals": {engineer: [score per seed]}}``, for results recorded as a table)."""
    data = json.loads(Path(compare_json).read_text())
    if "runs" not in data:
        if not isinstance(data.get("finals"), dict):
            raise ValueError(f"{compare_json}: neither a compare.json (runs) nor a finals file (finals)")
        return {e: [float(v) for v in vs] for e, vs in data["finals"].items()}
    finals: dict[str, list[tuple[int, float]]] = {}
    for row in data["runs"]:
        if row.get("complete") and row.get("final_score") is not None:
            finals.setdefault(row["engineer"], []).append((int(row["seed"]), float(row["final_score"])))
    return {e: [v for _, v in sorted(rows)] for e, rows in finals.items()}


def _named(spec: str) -> tuple[str, Path]:
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH/compare.json, got {spec!r}")
    return name, Path(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a", type=_named, required=True, metavar="NAME=COMPARE_JSON")
    parser.add_argument("--b", type=_named, action="append", required=True, metavar="NAME=COMPARE_JSON")
    parser.add_argument("--resamples", type=int, default=4000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    name_a, path_a = args.a
    a = finals_of(path_a)
    result = {"a": {"name": name_a, "compare_json": str(path_a)}, "against": {}}
    for name_b, path_b in args.b:
        result["against"][name_b] = {"compare_json": str(path_b),
                                     **rank_correlation(a, finals_of(path_b), resamples=args.resamples)}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
