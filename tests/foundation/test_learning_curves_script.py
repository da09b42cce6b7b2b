"""scripts/learning_curves.py reads a comparison's run dirs into per-round curves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "learning_curves.py"


def _report(score: float, optimal: float) -> dict:
    return {"score": score, "metrics": {"optimal_rate": optimal, "mean_tokens": 60.0}}


def test_curves_average_each_rounds_steps_and_read_its_evals(tmp_path):
    run = tmp_path / "runs" / "fixed-seed3"
    for index, test in enumerate([0.2, 0.25]):
        (run / "rounds" / f"round_{index:03d}").mkdir(parents=True)
        (run / "rounds" / f"round_{index:03d}" / "test_eval.json").write_text(json.dumps(_report(test, test / 2)))
    (run / "warmstart_test_eval.json").write_text(json.dumps(_report(0.1, 0.05)))
    steps = [{"round": 0, "step": 1, "frac_reward_zero_std": 0.5, "reward": 0.1, "entropy": 0.08},
             {"round": 0, "step": 2, "frac_reward_zero_std": 0.7, "reward": 0.3, "entropy": 0.06},
             {"round": 1, "step": 3, "frac_reward_zero_std": 0.4, "reward": 0.2},
             {"round": 1, "event": "eval", "score": 0.25}]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(s) for s in steps) + "\n")
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, check=True)
    curves = json.loads(out.stdout)
    assert list(curves) == ["seed3"]
    seed = curves["seed3"]
    assert seed["warm_start"] == {"test": 0.1, "test_optimal": 0.05, "test_tokens": 60.0}
    first, second = seed["rounds"]
    assert first["steps"] == 2 and first["groups_without_spread"] == 0.6 and first["train_reward"] == 0.2
    assert first["entropy"] == 0.07 and first["test"] == 0.2
    assert second["steps"] == 1 and second["test"] == 0.25 and "entropy" not in second


def test_a_dir_without_runs_is_a_clear_error(tmp_path):
    (tmp_path / "runs").mkdir()
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert out.returncode != 0 and "no run dirs" in out.stderr
