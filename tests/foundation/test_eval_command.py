"""``curriculum eval``: per-task results, the starting model (warm start from the cache), a larger
suite by ``--set``, and a paired comparison with another eval."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.config import load_config
from curriculum.loop import evaluate_run, run
from curriculum.rundir import read_json
from tests.foundation.test_loop import tiny_overrides


@pytest.fixture(scope="module")
def warm_run(tiny_model_dir, tmp_path_factory):
    """One round after a (cached) warm start whose high learning rate visibly changes the answers."""
    tmp = tmp_path_factory.mktemp("evalcmd")
    mp = pytest.MonkeyPatch()
    mp.setenv("CURRICULUM_CACHE", str(tmp / "cache"))
    config = load_config(None, tiny_overrides(tiny_model_dir, tmp, rounds=1, **{
        "trainer.warmstart.steps": 2, "trainer.warmstart.batch_size": 2,
        "trainer.warmstart.learning_rate": 5e-2, "testbed.eval_sizes": "[3x3,4x4]",
        "testbed.eval_instances_per_size": 2, "testbed.eval_samples": 8,
        "eval_before_training": "true"}))
    yield run(config).run_dir
    mp.undo()


def _responses(report) -> list[str]:
    samples = report["samples"] if isinstance(report, dict) else report.samples
    return [s["response"] for s in samples]


def test_eval_reports_carry_one_result_per_task(warm_run):
    saved = read_json(warm_run / "rounds" / "round_000" / "eval.json")
    ids = [s["id"] for s in saved["samples"]]
    assert len(saved["task_scores"]) == 4 and set(ids) <= set(saved["task_scores"])
    assert all(v in (0.0, 1.0) for v in saved["task_scores"].values())


def test_start_evaluates_the_runs_warm_started_model(warm_run):
    baseline = read_json(warm_run / "baseline_eval.json")
    warm = read_json(warm_run / "warmstart_eval.json")
    assert _responses(baseline) != _responses(warm)  # the warm start changed the answers
    again = evaluate_run(warm_run, start=True)
    assert _responses(again) == _responses(warm)  # the same weights: the cache key matched
    assert again.task_scores == warm["task_scores"]


def test_last_round_eval_repeats_and_set_enlarges_the_suite(warm_run):
    saved = read_json(warm_run / "rounds" / "round_000" / "eval.json")
    assert _responses(evaluate_run(warm_run)) == _responses(saved)
    larger = evaluate_run(warm_run, overrides=["testbed.eval_instances_per_size=3"])
    assert len(larger.task_scores) == 6 and set(saved["task_scores"]) < set(larger.task_scores)


def test_cli_writes_the_report_and_compares_task_by_task(warm_run, tmp_path):
    out = tmp_path / "start.json"
    result = CliRunner().invoke(app, ["eval", str(warm_run), "--start", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert set(json.loads(out.read_text())["task_scores"]) == set(read_json(warm_run / "warmstart_eval.json")["task_scores"])
    result = CliRunner().invoke(app, ["eval", str(warm_run), "--against", str(out)])
    assert result.exit_code == 0, result.output
    assert "4 shared tasks:" in result.output and "sign test p =" in result.output


def test_cli_refuses_what_it_cannot_compare(warm_run, tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"score": 0.5, "metrics": {}}))  # written before per-task results existed
    result = CliRunner().invoke(app, ["eval", str(warm_run), "--against", str(old)])
    assert result.exit_code == 2 and "no per-task results" in result.output
    junk = tmp_path / "junk.json"
    junk.write_text("[1, 2")
    result = CliRunner().invoke(app, ["eval", str(warm_run), "--against", str(junk)])
    assert result.exit_code == 2 and "not an eval report" in result.output
    result = CliRunner().invoke(app, ["eval", str(warm_run), "--start", "--round", "0"])
    assert result.exit_code == 2 and "exclude each other" in result.output
    result = CliRunner().invoke(app, ["eval", str(warm_run), "--set", "testbed.eval_sizes=[11x11]"])
    assert result.exit_code == 2 and "error" in result.output
