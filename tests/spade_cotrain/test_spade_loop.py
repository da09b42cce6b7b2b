"""A 4-step scripted SPADE run through the controller, killed with SIGKILL and resumed: the final
metrics equal those of an uninterrupted run, the held-out games' curve included."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
VOLATILE = ("seconds", "runtime", "per_second", "time", "timestamp", "wall")


def _config(tiny_model_dir, out: Path, name: str) -> dict:
    return {
        "model": {"name_or_path": str(tiny_model_dir)},
        "trainer": {"name": "selfplay_scripted", "learning_rate": 0.01, "beta": 0.0, "designer_delay": 1,
                    "is_cap": 2.0, "micro_batch_size": 8, "torch_threads": 1,
                    "play": {"episodes_per_condition": 3, "max_turns": 2},
                    "pool": {"envs_per_step": 3, "max_plays": 2},
                    "heldout_games": 1, "heldout_episodes": 2},
        "testbed": {"name": "spade_pool", "setting": "games", "eval_every": 2, "final_eval_call": 3,
                    "reasoning_gym": {"datasets": {"maths": ["basic_arithmetic"]}, "per_dataset": 2,
                                      "max_new_tokens": 4}},
        "engineer": {"name": "spade_scripted"},
        "generation": {"max_new_tokens": 4, "batch_size": 4},
        "rounds": 4, "tasks_per_round": 1, "seed": 11, "output_dir": str(out), "run_name": name,
    }


def _train_records(run_dir: Path) -> list[dict]:
    out = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("event") in ("spade_step", "round_committed", "eval"):
            out.append({k: v for k, v in rec.items() if not any(s in k for s in VOLATILE)})
    return out


def _launch(config_path: Path, resume: Path | None = None) -> subprocess.Popen:
    args = [sys.executable, str(HERE / "run_scripted.py"), str(config_path)] + ([str(resume)] if resume else [])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1",  # this checkout's code:
           "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_scripted_run_resumes_after_sigkill(tiny_model_dir, tmp_path):
    pytest.importorskip("reasoning_gym")
    configs = {}
    for name in ("straight", "killed"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_config(tiny_model_dir, tmp_path / "runs", name)))
        configs[name] = path
    straight = _launch(configs["straight"])
    killed = _launch(configs["killed"])
    run_dir = tmp_path / "runs" / "killed"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and killed.poll() is None:
        if (run_dir / "rounds" / "round_001").exists():  # kill while round 2 is under way
            break
        time.sleep(0.2)
    assert killed.poll() is None, killed.communicate()[1][-3000:]
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    out, err = straight.communicate(timeout=600)
    assert straight.returncode == 0, err[-3000:]
    resumed = _launch(configs["killed"], resume=run_dir)
    out2, err2 = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err2[-3000:]

    a = _train_records(tmp_path / "runs" / "straight")
    b = _train_records(run_dir)
    steps = [r for r in a if r.get("event") == "spade_step"]
    assert len(steps) == 4
    # regret from actual plays, both roles trained: designs of step 1 train at step 2
    assert steps[1]["spade/designer/regret"] > 0 and steps[1]["spade/designer_rows"] == 0
    assert steps[2]["spade/designer_rows"] == 4 and steps[2]["spade/agent_rows"] > 0
    assert steps[3]["spade/win_rate_hint"] == 1.0
    # the player's held-out curve: one value per round, in metrics.jsonl and the round records
    assert all(0.0 <= s["spade/heldout_win_rate"] <= 1.0 and s["spade/heldout_episodes"] == 2 for s in steps)
    record = json.loads((tmp_path / "runs" / "straight" / "spade_heldout_games.json").read_text())
    assert (run_dir / "spade_heldout_games.json").read_text() == json.dumps(record, indent=1) + "\n"
    assert all(f"spade/heldout/{record['games'][0]['name']}" in s for s in steps)
    assert b == a
    # play results reach the engineer through the round record (and survive the resume)
    from curriculum.rundir import RunDir

    straight_rounds, resumed_rounds = RunDir.open(tmp_path / "runs" / "straight").history(), RunDir.open(run_dir).history()
    assert {o.env_id for o in straight_rounds[1].env_outcomes} >= {"guess-1", "easy-1"}
    assert [r.train_metrics["spade/heldout_win_rate"] for r in straight_rounds] == \
        [s["spade/heldout_win_rate"] for s in steps]
    assert [r.env_outcomes for r in resumed_rounds] == [r.env_outcomes for r in straight_rounds]
