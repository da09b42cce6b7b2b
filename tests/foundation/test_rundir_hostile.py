"""Run dirs that never lie: a missing middle round, metrics that disagree with the rounds,
a refused resume that must write nothing, and a read-only run dir.

Runs use the simulated learner (seconds per run) with the real MAPF testbed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.loop import run
from curriculum.rundir import RunDir
from test_rundir_integrity import _config, finished  # noqa: F401  (the same simulated run and its fixture)

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def _invoke(*args: str):
    result = runner.invoke(app, list(args), terminal_width=400)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result, " ".join((result.output + result.stderr).split()).replace("/.r ound", "/.round")


def _history(run_dir: RunDir):
    return [(h.proposal, h.eval.score) for h in run_dir.history()]


def _committed(run_dir: RunDir) -> list[tuple[int, float]]:
    return [(v["round"], v["score"]) for r in run_dir.metrics_records()
            if isinstance(v := r.value, dict) and v.get("event") == "round_committed"]


def test_a_missing_middle_round_is_named_and_the_resume_repairs_it(finished):
    before, committed = _history(finished), _committed(finished)
    shutil.rmtree(finished.round_dir(1))
    res, text = _invoke("doctor", str(finished.path))
    assert res.exit_code == 1 and "round 1 is missing" in text, text
    assert "round(s) 2 cannot be continued from" in text
    res, text = _invoke("run", "--resume", str(finished.path))
    assert res.exit_code == 0, text
    assert "round 1 is missing" in text and "Resuming after round 0: round(s) 2 moved aside" in text
    assert (finished.rounds_dir / ".round_002.damaged").is_dir()  # kept, never deleted
    assert finished.completed_rounds() == [0, 1, 2]
    assert _history(finished) == before  # the deterministic learner reruns them identically
    assert _committed(finished) == committed
    res, text = _invoke("doctor", str(finished.path))
    assert res.exit_code == 0 and "agreeing with all 3 rounds" in text, text


def test_a_missing_first_round_starts_over_with_the_rest_kept_aside(finished):
    before = _history(finished)
    shutil.rmtree(finished.round_dir(0))
    res, text = _invoke("run", "--resume", str(finished.path))
    assert res.exit_code == 0, text
    assert "round 0 is missing" in text and "Resuming from the start" in text
    assert (finished.rounds_dir / ".round_001.damaged").is_dir()
    assert _history(finished) == before


def test_metrics_that_disagree_with_a_round_are_named_and_a_resume_rewrites_them(finished):
    lines = finished.metrics_path.read_text().splitlines()
    changed, dropped = [], False
    for line in lines:
        value = json.loads(line)
        if value.get("event") == "round_committed" and value["round"] == 1:
            value["score"] = 0.123456
        if value.get("event") == "round_committed" and value["round"] == 2:
            dropped = True
            continue  # as a kill between the commit and the log leaves it
        changed.append(json.dumps(value))
    assert dropped
    finished.metrics_path.write_text("\n".join(changed) + "\n")
    res, text = _invoke("doctor", str(finished.path))
    assert res.exit_code == 1, text
    assert "round 1: score 0.123456 in metrics.jsonl" in text and "rounds/round_001/eval.json" in text
    assert "no round_committed record for round 2" in text
    res, text = _invoke("run", "--resume", str(finished.path))
    assert res.exit_code == 0, text
    scores = {i: finished.load_round(i).eval.score for i in range(3)}
    assert _committed(finished) == sorted(scores.items())
    res, text = _invoke("doctor", str(finished.path))
    assert res.exit_code == 0, text


def test_a_refused_resume_writes_nothing(tmp_path, monkeypatch):
    """Nothing intact remains, and --rounds asks for an extension: the refusal comes before
    config.yaml (or anything else) is rewritten."""
    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path / "cache"))
    run_dir = RunDir.open(run(_config(tmp_path / "runs", rounds=2)).run_dir)
    (run_dir.round_dir(0) / "proposal.json").write_text("{}")
    config, metrics = (run_dir.path / "config.yaml").read_bytes(), run_dir.metrics_path.read_bytes()
    res, text = _invoke("run", "--resume", str(run_dir.path), "--rounds", "3")
    assert res.exit_code == 2 and "no intact round remains" in text
    assert (run_dir.path / "config.yaml").read_bytes() == config
    assert run_dir.metrics_path.read_bytes() == metrics
    assert run_dir.completed_rounds() == [0, 1]


def test_doctor_opens_nothing_for_writing(finished, monkeypatch):
    """Every open of a run-dir file by the doctor is read-only (the lock included)."""
    import builtins

    real_open, modes = builtins.open, []

    def watching(file, mode="r", *args, **kwargs):
        if str(finished.path) in str(file):
            modes.append((str(file), mode))
            if set(mode) & set("wax+"):
                raise PermissionError(13, "Read-only file system", str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", watching)
    res, text = _invoke("doctor", str(finished.path))
    assert res.exit_code == 0, text
    assert any(name.endswith(".lock") for name, _ in modes)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root to run the doctor as an unprivileged user")
def test_doctor_and_resume_on_a_read_only_run_dir(finished):
    base = Path(tempfile.mkdtemp(prefix="curriculum-readonly-"))
    try:
        os.chmod(base, 0o755)
        copy = base / "run"
        shutil.copytree(finished.path, copy)
        for directory, _, files in os.walk(copy):
            os.chmod(directory, 0o555)
            for name in files:
                os.chmod(os.path.join(directory, name), 0o444)
        command = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                   sys.executable, "-c", "from curriculum.cli import app; app()"]
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "HOME": str(base),
               "CURRICULUM_CACHE": str(base / "cache"), "COLUMNS": "400"}
        doctor = subprocess.run([*command, "doctor", str(copy)], capture_output=True, text=True,
                                env=env, cwd=base, timeout=120)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        assert "Traceback" not in doctor.stderr and "intact" in doctor.stdout
        resume = subprocess.run([*command, "run", "--resume", str(copy)], capture_output=True,
                                text=True, env=env, cwd=base, timeout=120)
        assert resume.returncode == 2, resume.stdout + resume.stderr
        assert "Traceback" not in resume.stderr
        assert "needs write access" in " ".join(resume.stderr.split())
    finally:
        for directory, _, _ in os.walk(base):
            os.chmod(directory, 0o755)
        shutil.rmtree(base)


def _run_cli(tmp_path: Path, *args: str):
    sets = ["trainer.name=simulated", "testbed.eval_agents=[2]", "testbed.eval_instances_per_size=1",
            "testbed.eval_samples=1", "tasks_per_round=8", "rounds=2"]
    empty = tmp_path / "defaults.yaml"
    empty.write_text("{}\n")
    return _invoke("run", "--config", str(empty), *[a for s in sets for a in ("--set", s)], *args)


@pytest.mark.parametrize("case", ["long_run_name", "long_output_dir", "output_dir_is_a_file",
                                  "output_dir_in_proc"])
def test_bad_places_for_a_run_dir_are_one_line_errors(tmp_path, monkeypatch, case):
    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path / "cache"))
    afile = tmp_path / "a_file"
    afile.write_text("x")
    args = {"long_run_name": ["--output-dir", str(tmp_path), "--run-name", "r" * 300],
            "long_output_dir": ["--output-dir", str(tmp_path / ("d" * 300)), "--run-name", "r"],
            "output_dir_is_a_file": ["--output-dir", str(afile), "--run-name", "r"],
            "output_dir_in_proc": ["--output-dir", "/proc/self", "--run-name", "r"]}[case]
    res, text = _run_cli(tmp_path, *args)
    assert res.exit_code == 2, text
    expected = {"long_run_name": "at most 200", "long_output_dir": "too long for the file system",
                "output_dir_is_a_file": "is not a directory",
                "output_dir_in_proc": "cannot create the run directory /proc/self/r"}[case]
    assert expected in text, text


def test_a_full_disk_is_a_message_and_committed_rounds_stay(tmp_path, monkeypatch):
    import errno

    import curriculum.rundir as rundir

    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path / "cache"))
    real = rundir.write_json

    def filling(path, value):
        if "round_001" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, value)

    monkeypatch.setattr(rundir, "write_json", filling)
    res, text = _run_cli(tmp_path, "--output-dir", str(tmp_path / "runs"), "--run-name", "r")
    assert res.exit_code == 2 and "No space left on device" in text and "--resume" in text, text
    run_dir = RunDir.open(tmp_path / "runs" / "r")
    assert run_dir.completed_rounds() == [0] and run_dir.check_round(0).resumable


def test_an_empty_config_file_is_an_error(tmp_path):
    for text in ("", "\n\n", "# only a comment\n"):
        path = tmp_path / "empty.yaml"
        path.write_text(text)
        res, out = _invoke("run", "--config", str(path), "--dry-run")
        assert res.exit_code == 2 and "is empty (no settings)" in out, out


def test_a_config_over_the_size_cap_is_refused_before_parsing(tmp_path):
    import time

    path = tmp_path / "huge.yaml"
    path.write_text("tasks_per_round: 8\nnotes: [" + "1, " * 2_500_000 + "]\n")  # 7.5 MB
    started = time.monotonic()
    res, out = _invoke("run", "--config", str(path), "--dry-run")
    assert res.exit_code == 2 and "over the 65,536-byte limit" in out, out
    assert time.monotonic() - started < 5


def test_a_file_in_a_rounds_place_is_named_and_moved_aside(finished):
    before = _history(finished)
    shutil.rmtree(finished.round_dir(1))
    finished.round_dir(1).write_text("not a round")
    res, text = _invoke("doctor", str(finished.path))
    assert res.exit_code == 1 and "rounds/round_001 not a round directory" in text, text
    res, text = _invoke("run", "--resume", str(finished.path))
    assert res.exit_code == 0, text
    assert (finished.rounds_dir / ".round_001.damaged").read_text() == "not a round"
    assert _history(finished) == before


BOMB = "\n".join(["x0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
                 + [f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)])


def test_yaml_alias_bombs_are_refused_quickly(tmp_path, finished):
    import time

    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB + "\ntestbed:\n  name: mapf_frozenlake\n  eval_agents: *a8\n")  # 9**9 values
    started = time.monotonic()
    res, text = _invoke("run", "--config", str(path), "--dry-run")
    assert res.exit_code == 2 and "expands to more than 100,000 values" in text, text
    res, text = _invoke("run", "--dry-run", "--set",
                        "testbed.eval_agents=[&a [1,1,1,1,1,1,1,1,1], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a], "
                        "&c [*b,*b,*b,*b,*b,*b,*b,*b,*b], &d [*c,*c,*c,*c,*c,*c,*c,*c,*c], "
                        "&e [*d,*d,*d,*d,*d,*d,*d,*d,*d], &f [*e,*e,*e,*e,*e,*e,*e,*e,*e], "
                        "[*f,*f,*f,*f,*f,*f,*f,*f,*f]]")
    assert res.exit_code == 2 and "expands to more than 100,000 values" in text, text
    config = finished.path / "config.yaml"  # a saved config edited into a bomb
    config.write_text(BOMB + "\n" + config.read_text())
    res, text = _invoke("doctor", str(finished.path))
    assert res.exit_code == 1 and "expands to more than" in text, text
    assert time.monotonic() - started < 30
