"""Checkpoint retention: only the last k rounds keep weights, and resume stays exact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from curriculum.config import load_config
from curriculum.loop import evaluate_run, run
from curriculum.rundir import RunDir
from tests.foundation.test_loop import ROOT, empty_config, tiny_overrides


def test_keep_last_checkpoint_prunes_older_rounds(tiny_model_dir, tmp_path):
    result = run(load_config(None, tiny_overrides(tiny_model_dir, tmp_path, rounds=3, keep_checkpoints=1)))
    run_dir = RunDir.open(result.run_dir)
    assert run_dir.completed_rounds() == [0, 1, 2]
    assert [i for i in range(3) if run_dir.checkpoint(i) is not None] == [2]
    assert run_dir.pruned_rounds() == [0, 1]
    for i in range(3):  # records stay
        assert (run_dir.round_dir(i) / "eval.json").is_file()
    with pytest.raises(FileNotFoundError, match=r"round 0's checkpoint was not kept .*rounds with weights: \[2\]"):
        evaluate_run(result.run_dir, round_index=0)


def test_retention_does_not_change_results_and_resume_is_exact(tiny_model_dir, tmp_path):
    kept_all = run(load_config(None, tiny_overrides(tiny_model_dir, tmp_path / "all", rounds=3)))
    # Same run with keep_checkpoints=1, SIGKILLed right after round 1 is committed, then resumed.
    sets = tiny_overrides(tiny_model_dir, tmp_path / "pruned", rounds=3, keep_checkpoints=1)
    cmd = [sys.executable, "-m", "curriculum.cli", "run", "--config", str(empty_config(tmp_path / "pruned")),
           *sum((["--set", s] for s in sets), [])]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run_path = tmp_path / "pruned" / "run"
    deadline = time.monotonic() + 240
    while not (run_path / "rounds" / "round_001").is_dir():
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, "round 1 was not committed in time"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    resumed = run(RunDir.open(run_path).saved_config(), resume=run_path)
    assert [r.eval.score for r in resumed.history] == [r.eval.score for r in kept_all.history]
    assert [r.proposal for r in resumed.history] == [r.proposal for r in kept_all.history]
    assert [r.train_metrics["train/loss"] for r in resumed.history] == \
        [r.train_metrics["train/loss"] for r in kept_all.history]
    assert [i for i in range(3) if RunDir.open(run_path).checkpoint(i) is not None] == [2]


def test_a_finished_run_can_drop_its_optimizer_state_and_still_evaluates(tiny_model_dir, tmp_path):
    """``keep_final_optimizer_state: false`` deletes the last round's AdamW moments once it is
    committed (not before: a resume needs them), keeps the weights; the default keeps them."""
    kept = run(load_config(None, tiny_overrides(tiny_model_dir, tmp_path / "kept", rounds=2)))
    dropped = run(load_config(None, tiny_overrides(tiny_model_dir, tmp_path / "dropped", rounds=2,
                                                   keep_final_optimizer_state="false")))
    for result, final_state in ((kept, True), (dropped, False)):
        rounds = RunDir.open(result.run_dir)
        assert (rounds.round_dir(0) / "checkpoint" / "optimizer.pt").is_file()  # not the last round
        assert (rounds.round_dir(1) / "checkpoint" / "optimizer.pt").is_file() is final_state
        assert (rounds.round_dir(1) / "checkpoint" / "model" / "config.json").is_file()
    # Same training either way: dropping happens after the last round is committed.
    assert dropped.history[-1].eval.score == kept.history[-1].eval.score
    assert evaluate_run(dropped.run_dir).score == evaluate_run(kept.run_dir).score
