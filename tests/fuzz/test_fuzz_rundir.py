"""Fuzzing run-dir files (hypothesis): damage any committed file in any way, and ``doctor``,
``show`` and ``run --resume`` answer without a traceback; a resume either refuses or
finishes the run, and every committed byte is still somewhere in the run dir afterwards (rounds
it drops are moved aside, never deleted)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.config import ConfigError, load_config
from curriculum.doctor import diagnose
from curriculum.loop import run
from curriculum.rundir import RESUME_STATE, RunDir

runner = CliRunner()


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-rundir")
    old = os.environ.get("CURRICULUM_CACHE")
    os.environ["CURRICULUM_CACHE"] = str(root / "cache")
    sets = {"trainer.name": "simulated", "testbed.eval_agents": "[2]",
            "testbed.eval_instances_per_size": 1, "testbed.eval_samples": 1, "tasks_per_round": 8,
            "rounds": 3, "output_dir": str(root / "runs"), "run_name": "run"}
    path = run(load_config(None, [f"{k}={v}" for k, v in sets.items()])).run_dir
    yield path
    if old is None:
        os.environ.pop("CURRICULUM_CACHE", None)
    else:
        os.environ["CURRICULUM_CACHE"] = old


def _files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")
                  if p.is_file() and p.name != ".lock")


damage = st.tuples(
    st.integers(0, 10_000),  # which file (modulo the file count)
    st.sampled_from(["overwrite", "truncate", "flip", "delete", "append", "empty"]),
    st.binary(min_size=1, max_size=40),
    st.integers(0, 10_000),
)


def _apply(path: Path, damages) -> None:
    files = _files(path)
    for which, how, data, where in damages:
        target = path / files[which % len(files)]
        if not target.exists():
            continue
        raw = target.read_bytes()
        if how == "overwrite":
            target.write_bytes(data)
        elif how == "truncate":
            target.write_bytes(raw[: where % (len(raw) + 1)])
        elif how == "flip" and raw:
            i = where % len(raw)
            target.write_bytes(raw[:i] + bytes([raw[i] ^ (data[0] or 1)]) + raw[i + 1:])
        elif how == "delete":
            target.unlink()
        elif how == "append":
            target.write_bytes(raw + data)
        elif how == "empty":
            target.write_bytes(b"")


def _digests(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _no_traceback(result):
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                      HealthCheck.too_slow])


@settings(max_examples=25, **SETTINGS)
@given(damages=st.lists(damage, min_size=1, max_size=3))
def test_doctor_and_show_answer_on_any_damage(template, tmp_path_factory, damages):
    path = tmp_path_factory.mktemp("d") / "run"
    shutil.copytree(template, path)
    _apply(path, damages)
    try:
        report = diagnose(path)
        assert report.resume
    except ConfigError:
        pass
    for command in (["doctor"], ["show"], ["show", "--round", "1"]):
        result = runner.invoke(app, [*command, str(path)])
        _no_traceback(result)
        assert result.exit_code in (0, 1, 2)


@settings(max_examples=8, **SETTINGS)
@given(damages=st.lists(damage, min_size=1, max_size=2))
def test_resume_on_any_damage_finishes_or_refuses_and_loses_nothing(template, tmp_path_factory,
                                                                     damages):
    path = tmp_path_factory.mktemp("r") / "run"
    shutil.copytree(template, path)
    _apply(path, damages)
    run_dir = RunDir(path)
    before = {i: _digests(run_dir.round_dir(i)) for i in run_dir.completed_rounds()}
    result = runner.invoke(app, ["run", "--resume", str(path)])
    _no_traceback(result)
    assert result.exit_code in (0, 2), result.output
    for index, digests in before.items():  # every committed round is where it was, or aside
        places = [run_dir.round_dir(index)] + sorted(run_dir.rounds_dir.glob(f".round_{index:03d}.damaged*"))
        assert any(p.is_dir() and _digests(p) == digests for p in places), index
    if result.exit_code == 0:  # finished: records intact everywhere, the last round in full
        assert run_dir.completed_rounds() == [0, 1, 2]
        assert run_dir.check_round(2).resumable
        assert not any(run_dir.check_round(i).damaged_outside(RESUME_STATE) for i in range(3))
