"""``curriculum eval --out`` that cannot be written is refused before the eval runs, and a write
that fails leaves no temporary file behind.

Runs use the simulated learner (seconds per run) with the real MAPF testbed.
"""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

import curriculum.loop
from curriculum.rundir import atomic_write
from test_rundir_integrity import finished  # noqa: F401

runner = CliRunner()


def _never(*args, **kwargs):
    raise AssertionError("the eval ran before --out was checked")


@pytest.mark.parametrize("target, message", [
    ("dir", "is a directory"),
    ("missing/report.json", "does not exist"),
    ("fifo", "not a regular file"),
])
def test_an_unwritable_out_is_refused_before_the_eval(finished, tmp_path, monkeypatch, target, message):
    from curriculum.cli import app

    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    monkeypatch.setattr(curriculum.loop, "evaluate_run", _never)
    before = sorted(os.listdir(tmp_path))
    result = runner.invoke(app, ["eval", str(finished.path), "--out", str(tmp_path / target)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output
    assert sorted(os.listdir(tmp_path)) == before


def test_a_failed_atomic_write_leaves_no_temporary_file(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "inside").write_text("x")  # a non-empty directory cannot be replaced
    with pytest.raises(OSError):
        atomic_write(tmp_path / "taken", "text")
    assert sorted(os.listdir(tmp_path)) == ["taken"]
