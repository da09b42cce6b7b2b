"""Run-dir integrity: per-round manifests, resume past damage, doctor, and extending a run.

Runs use the simulated learner (seconds per run) with the real MAPF testbed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.config import ConfigError, load_config
from curriculum.loop import run
from curriculum.manifest import check_round_dir
from curriculum.rundir import RunDir

runner = CliRunner()


def _config(out: Path, rounds: int = 3, **extra):
    sets = {"trainer.name": "simulated", "testbed.eval_agents": "[2]",
            "testbed.eval_instances_per_size": 1, "testbed.eval_samples": 1,
            "tasks_per_round": 8, "rounds": rounds, "output_dir": str(out), "run_name": "run"}
    sets.update(extra)
    return load_config(None, [f"{k}={v}" for k, v in sets.items()])


@pytest.fixture
def finished(tmp_path, monkeypatch):
    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path / "cache"))
    result = run(_config(tmp_path / "runs"))
    return RunDir.open(result.run_dir)


def _resume(path: Path, *args: str):
    return runner.invoke(app, ["run", "--resume", str(path), *args], terminal_width=400)


def _clean(result):
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


def _text(result) -> str:
    """Output and errors with rich's line wrapping undone."""
    return " ".join((result.output + result.stderr).split()).replace("/.r ound", "/.round")


def _history(run_dir: RunDir):
    return [(h.proposal, h.eval.score) for h in run_dir.history()]


def test_every_committed_round_has_a_manifest_that_verifies(finished):
    for index in finished.completed_rounds():
        health = finished.check_round(index)
        assert health.resumable and health.verified and health.files >= 5
        manifest = json.loads((finished.round_dir(index) / "manifest.json").read_text())
        assert "checkpoint/simulated_state.json" in manifest["files"]


def test_damaged_last_round_resumes_from_the_last_intact_one(finished):
    before = _history(finished)
    damaged = finished.round_dir(2) / "state.json"
    damaged.write_text(damaged.read_text().replace("{", "[", 1))  # an editor's slip
    res = _resume(finished.path)
    _clean(res)
    assert res.exit_code == 0, res.output
    assert "round 2: state.json: does not match its checksum" in _text(res)
    assert "Resuming after round 1" in _text(res)
    # the damaged round is kept aside, the rerun round is identical (deterministic learner)
    kept = finished.rounds_dir / ".round_002.damaged"
    assert kept.is_dir() and (kept / "state.json").read_text().startswith("[")
    assert _history(finished) == before
    assert finished.check_round(2).resumable


def test_damaged_records_of_an_earlier_round_fall_back_before_them(finished):
    (finished.round_dir(1) / "eval.json").write_bytes(b"\xff\xfe")
    res = _resume(finished.path)
    _clean(res)
    assert res.exit_code == 0 and "round 1: eval.json: does not match" in _text(res)
    assert "Resuming after round 0: round(s) 1, 2 moved aside" in _text(res)
    assert finished.completed_rounds() == [0, 1, 2]


@pytest.mark.parametrize("keep", [1, 2])
def test_with_checkpoint_retention_it_falls_back_as_far_as_weights_remain(tmp_path, monkeypatch, keep):
    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path / "cache"))
    finished = RunDir.open(run(_config(tmp_path / "runs", keep_checkpoints=keep)).run_dir)
    health = finished.check_round(0)
    assert health.pruned == ["checkpoint"] and health.ok and not health.resumable
    damaged = finished.round_dir(2) / "state.json"
    damaged.write_bytes(damaged.read_bytes()[:-7])  # a partial copy
    res = _resume(finished.path)
    _clean(res)
    if keep == 1:  # round 1's weights were pruned: nothing to fall back to
        assert res.exit_code == 2
        assert "cannot fall back further" in _text(res) and "round 2: state.json" in _text(res)
        assert finished.completed_rounds() == [0, 1, 2]  # nothing moved or deleted
    else:
        assert res.exit_code == 0 and "Resuming after round 1" in _text(res)
        assert finished.check_round(2).resumable


def test_nothing_intact_remains(tmp_path, monkeypatch):
    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path / "cache"))
    run_dir = RunDir.open(run(_config(tmp_path / "runs", rounds=2)).run_dir)
    (run_dir.round_dir(0) / "proposal.json").write_text("{}")
    res = _resume(run_dir.path, "--rounds", "3")
    _clean(res)
    assert res.exit_code == 2 and "no intact round remains" in _text(res)
    assert "proposal.json: does not match its checksum" in _text(res)


def test_corrupt_config_and_metrics(finished):
    lines = finished.metrics_path.read_bytes().splitlines()
    finished.metrics_path.write_bytes(b"\n".join(lines[:3] + [b"\xff{", b'{"round": 1'] + lines[3:]))
    res = runner.invoke(app, ["doctor", str(finished.path)], terminal_width=400)
    assert res.exit_code == 0 and "unreadable line(s) 4, 5" in _text(res)
    config = finished.path / "config.yaml"
    config.write_bytes(b"rounds: [\x00")
    for command in ("run --resume", "doctor", "eval", "report"):
        res = runner.invoke(app, [*command.split(), str(finished.path)], terminal_width=400)
        _clean(res)
        assert res.exit_code in (1, 2) and "config.yaml" in _text(res)
        assert "is damaged (not valid YAML" in _text(res)


def test_doctor_reports_health_and_the_resume_verdict(finished):
    res = runner.invoke(app, ["doctor", str(finished.path)], terminal_width=400)
    assert res.exit_code == 0, res.output
    assert _text(res).count("intact") == 3 and "finished (3 of 3 rounds)" in _text(res)
    shutil.rmtree(finished.round_dir(0) / "checkpoint")  # as retention does
    (finished.round_dir(2) / "checkpoint" / "simulated_state.json").write_text("{}")
    (finished.rounds_dir / ".round_003.partial").mkdir()
    res = runner.invoke(app, ["doctor", str(finished.path)], terminal_width=400)
    _clean(res)
    assert res.exit_code == 1
    assert "pruned: checkpoint/" in _text(res) and "DAMAGED" in _text(res)
    assert "checkpoint/simulated_state.json: does not match its checksum" in _text(res)
    assert "an interrupted round" in _text(res) and "would fall back" in _text(res)
    assert finished.completed_rounds() == [0, 1, 2]  # the doctor changes nothing
    res = runner.invoke(app, ["doctor", str(finished.path / "nope")])
    _clean(res)
    assert res.exit_code == 2 and "not a run directory" in _text(res)


def test_run_dirs_without_manifests_still_resume(finished):
    for index in finished.completed_rounds():
        (finished.round_dir(index) / "manifest.json").unlink()
    assert not finished.check_round(2).verified and finished.check_round(2).resumable
    (finished.round_dir(2) / "eval.json").write_text("{oops")
    res = _resume(finished.path)
    _clean(res)
    assert res.exit_code == 0 and "eval.json: is not valid JSON" in _text(res)


def test_extending_a_finished_run_equals_running_longer(finished, tmp_path):
    res = _resume(finished.path, "--rounds", "5")
    _clean(res)
    assert res.exit_code == 0, res.output
    assert "extending the run from 3 to 5 rounds" in _text(res)
    assert finished.completed_rounds() == [0, 1, 2, 3, 4]
    assert finished.saved_config().rounds == 5
    assert all(finished.check_round(i).resumable for i in range(5))
    design = json.loads((finished.round_dir(2) / "design.json").read_text())
    assert json.loads((finished.round_dir(3) / "proposal.json").read_text()) == design["projected"]
    longer = RunDir.open(run(_config(tmp_path / "longer", rounds=5)).run_dir)
    assert _history(finished) == _history(longer)


def test_other_changes_are_still_refused_with_the_differing_keys(finished):
    res = _resume(finished.path, "--rounds", "5", "--set", "seed=3")
    _clean(res)
    assert res.exit_code == 2 and "rounds: 3 -> 5" in _text(res) and "seed: 0 -> 3" in _text(res)
    res = _resume(finished.path, "--rounds", "2")
    assert res.exit_code == 2 and "only a larger round count can extend a run" in _text(res)
    assert finished.saved_config().rounds == 3


def test_an_extension_interrupted_between_its_renames_is_undone(finished):
    final = finished.round_dir(2)
    final.rename(finished.rounds_dir / ".round_002.replaced")
    finished.discard_partial()
    assert final.is_dir() and check_round_dir(final, 2).resumable


def test_a_config_yaml_changed_after_commit_is_noticed(finished):
    config = finished.path / "config.yaml"
    config.write_text(config.read_text().replace("seed: 0", "seed: 8"))  # still a valid config
    res = _resume(finished.path)
    _clean(res)
    assert res.exit_code == 2 and "differs from the config round 2 was committed with" in _text(res)
    res = runner.invoke(app, ["doctor", str(finished.path)])
    assert res.exit_code == 1 and "differs from the config round 2" in _text(res)


def test_damaged_state_of_an_older_round_is_reported_but_not_needed(finished):
    (finished.round_dir(0) / "state.json").write_bytes(b"\x00")
    res = _resume(finished.path, "--rounds", "4")
    _clean(res)
    assert res.exit_code == 0 and finished.completed_rounds() == [0, 1, 2, 3]
    assert "round 0: state.json: does not match its checksum" in _text(res)
    assert "needed only to resume from that round; kept as is" in _text(res)


def test_a_run_dir_moved_elsewhere_is_the_same_run(finished, tmp_path):
    """Where a run lives is not what it computes: a copy under another --out (a comparison
    gathered from several machines) is the same run, while any other key still differs."""
    moved = tmp_path / "elsewhere" / finished.path.name
    shutil.copytree(finished.path, moved)
    there = RunDir.open(moved)
    saved = there.saved_config()
    assert there.extends_config(saved.model_copy(update={"output_dir": tmp_path / "elsewhere"})) is False
    assert there.extends_config(saved.model_copy(update={"output_dir": tmp_path / "elsewhere", "rounds": 5}))
    with pytest.raises(ConfigError, match="seed: 0 -> 3"):
        there.extends_config(saved.model_copy(update={"output_dir": tmp_path / "elsewhere", "seed": 3}))
