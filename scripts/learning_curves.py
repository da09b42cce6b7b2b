"""Per-round learning curves of a comparison's runs, as one JSON: what docs/results draws its
"does GRPO teach?" tables from.

    python scripts/learning_curves.py runs/cpu_learns > docs/results/cpu_learns/learning_curves.json

For every run under ``COMPARE_DIR/runs``: the warm start's validation and test scores, then per round
the mean of TRL's per-step records (reward, the share of groups without reward spread, completion
tokens, entropy, gradient norm) and the round's validation and test scores (valid rate, optimal
rate, mean tokens). Reads the run dirs only.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from statistics import fmean
from typing import Any

STEP_KEYS = {"train_reward": "reward", "groups_without_spread": "frac_reward_zero_std",
             "completion_tokens": "completions/mean_length", "entropy": "entropy", "grad_norm": "grad_norm"}
"""Round field -> TRL's per-step key (averaged over the round's steps)."""


def _read(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _suite(report: dict[str, Any] | None, prefix: str) -> dict[str, float]:
    if report is None:
        return {}
    metrics = report.get("metrics", {})
    out = {prefix: round(report["score"], 4)}
    if "optimal_rate" in metrics:
        out[f"{prefix}_optimal"] = round(metrics["optimal_rate"], 4)
    if "mean_tokens" in metrics:
        out[f"{prefix}_tokens"] = round(metrics["mean_tokens"], 1)
    return out


def run_curve(run: Path) -> dict[str, Any]:
    steps: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for line in (run / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "frac_reward_zero_std" in record and isinstance(record.get("round"), int):
            steps[record["round"]].append(record)
    warm = {**_suite(_read(run / "warmstart_eval.json"), "validation"),
            **_suite(_read(run / "warmstart_test_eval.json"), "test")}
    rounds = []
    for round_dir in sorted((run / "rounds").glob("round_[0-9][0-9][0-9]")):
        index = int(round_dir.name.split("_")[1])
        records = steps.get(index, [])
        row: dict[str, Any] = {"round": index, "steps": len(records)}
        for field, key in STEP_KEYS.items():
            values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
            if values:
                row[field] = round(fmean(values), 4)
        row.update(_suite(_read(round_dir / "eval.json"), "validation"))
        row.update(_suite(_read(round_dir / "test_eval.json"), "test"))
        rounds.append(row)
    return {"warm_start": warm, "rounds": rounds}


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    runs = sorted(p for p in (Path(sys.argv[1]) / "runs").iterdir() if (p / "metrics.jsonl").is_file())
    if not runs:
        sys.exit(f"no run dirs with metrics.jsonl under {sys.argv[1]}/runs")
    curves = {run.name.rsplit("-", 1)[-1]: run_curve(run) for run in runs}
    print(json.dumps(curves, indent=1))


if __name__ == "__main__":
    main()
