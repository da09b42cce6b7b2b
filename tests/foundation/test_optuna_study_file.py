"""The optuna engineer's ``optuna.db`` lies beside the rounds, outside their checksums: it is tied
to them by a study token and a config fingerprint, and a study file that is another run's,
damaged or locked is one line from a resume (before anything is saved) and from ``doctor``.

Runs use the simulated learner (seconds per run) with the real MAPF testbed.
"""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from curriculum.config import ConfigError, load_config
from curriculum.doctor import diagnose
from curriculum.loop import run
from curriculum.rundir import RunDir


def _config(out, name, rounds=3):
    sets = {"trainer.name": "simulated", "engineer.name": "optuna", "testbed.eval_agents": "[2]",
            "testbed.eval_instances_per_size": 1, "testbed.eval_samples": 1, "tasks_per_round": 8,
            "rounds": rounds, "output_dir": str(out), "run_name": name}
    return load_config(None, [f"{k}={v}" for k, v in sets.items()])


@pytest.fixture
def two_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path / "cache"))
    first = RunDir.open(run(_config(tmp_path / "runs", "a")).run_dir)
    second = RunDir.open(run(_config(tmp_path / "runs", "b")).run_dir)
    return first, second


def _refused(run_dir: RunDir, tmp_path, needle: str) -> None:
    config_before = (run_dir.path / "config.yaml").read_bytes()
    with pytest.raises(ConfigError, match=needle):
        run(_config(tmp_path / "runs", run_dir.path.name, rounds=5), resume=run_dir.path)
    assert (run_dir.path / "config.yaml").read_bytes() == config_before  # nothing saved
    finding = [f for f in diagnose(run_dir.path).findings if f.subject == "engineer files"]
    assert finding and not finding[0].ok and needle in finding[0].detail


def test_a_study_copied_from_another_run_is_refused(two_runs, tmp_path):
    first, second = two_runs
    shutil.copy(second.path / "optuna.db", first.path / "optuna.db")
    _refused(first, tmp_path, "not this run's study")


def test_a_damaged_study_is_refused_before_anything_is_saved(two_runs, tmp_path):
    first, _ = two_runs
    path = first.path / "optuna.db"
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the first page's b-tree header and cells
    path.write_bytes(bytes(data))
    _refused(first, tmp_path, "damaged")


def test_a_locked_study_is_named_without_a_long_wait(two_runs, tmp_path):
    first, _ = two_runs
    holder = sqlite3.connect(str(first.path / "optuna.db"), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(ConfigError, match="locked by another process"):
            run(_config(tmp_path / "runs", first.path.name, rounds=5), resume=first.path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_the_own_study_still_resumes_and_extends(two_runs, tmp_path):
    first, _ = two_runs
    assert diagnose(first.path).healthy
    result = run(_config(tmp_path / "runs", first.path.name, rounds=4), resume=first.path)
    assert [r.round for r in result.history] == [0, 1, 2, 3]
