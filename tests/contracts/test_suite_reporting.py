"""Reports name the suite a number is on: a run's summary, ``curriculum show`` and ``compare``'s
table score on the test suite and say so; a run dir written before runs had two suites (one
``eval.json`` per round, no suite name, no test files) still loads, scored on its one suite and
labelled ``LEGACY_SUITE``."""

from __future__ import annotations

import io
import json
import math

import pytest
from rich.console import Console

from curriculum.compare import results_table
from curriculum.config import load_config
from curriculum.core.records import LEGACY_SUITE
from curriculum.loop import run
from curriculum.report import RunSummary, report_run
from curriculum.rundir import RunDir
from curriculum.show import show_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    config = load_config(None, ["trainer.name=simulated", "engineer.name=frontier", "testbed.eval_agents=[2]",
                                "testbed.eval_instances_per_size=2", "testbed.eval_sizes=[3x3,4x4]",
                                "tasks_per_round=8", "rounds=2", "eval_before_training=true",
                                f"output_dir={out}", "run_name=two-suites"])
    return run(config).run_dir


def _legacy_copy(run_dir, tmp_path):
    """The run as the code before two suites wrote it."""
    import shutil

    old = tmp_path / "legacy"
    shutil.copytree(run_dir, old)
    for path in [*old.glob("*_test_eval.json"), *old.glob("rounds/*/test_eval.json")]:
        path.unlink()
    for path in [*old.glob("*_eval.json"), *old.glob("rounds/*/eval.json")]:
        data = json.loads(path.read_text())
        data.pop("suite")
        path.write_text(json.dumps(data))
    return old


def _text(renderable) -> str:
    console = Console(file=io.StringIO(), width=200)
    console.print(renderable)
    return console.file.getvalue()


def _summary_table(summary: RunSummary) -> str:
    data = {"testbed": "mapf_frozenlake", "seeds": [0], "rounds": 2, "simulated": True, "notice": "",
            "engineers": ["frontier"], "suite": summary.suite, "pairwise": [],
            "summary": {"frontier": {"n": 1, "final_score": {"mean": summary.scores[-1], "low": 0, "high": 1},
                                     "mean_score_over_rounds": 0.5}}}
    return " ".join(_text(results_table(data)).split())  # titles wrap


def test_a_run_is_scored_on_its_test_suite_and_says_so(run_dir):
    history = RunDir.open(run_dir).history()
    summary = RunSummary.load(run_dir)
    assert summary.suite == "test"
    assert summary.scores == [r.test.score for r in history]
    assert summary.validation_scores == [r.eval.score for r in history]
    assert summary.baseline_score == json.loads((run_dir / "baseline_test_eval.json").read_text())["score"]
    assert "scored on the test suite" in _summary_table(summary)
    console = Console(file=io.StringIO(), width=200)
    show_run(run_dir, round_index=None, console=console)
    assert "test score" in console.file.getvalue() and "validation score" in console.file.getvalue()
    console = Console(file=io.StringIO(), width=200)
    show_run(run_dir, round_index=0, console=console)
    words = " ".join(console.file.getvalue().split())  # titles wrap
    assert "round 0 test suite (reported; not shown to the engineer)" in words
    assert "round 0 validation suite (what the engineer read)" in words
    assert report_run(run_dir)


def test_a_run_dir_from_before_two_suites_still_loads_labelled(run_dir, tmp_path):
    old = _legacy_copy(run_dir, tmp_path)
    history = RunDir.open(old).history()
    assert all(r.test is None and r.eval.suite is None for r in history)
    assert all(r.scored_suite() == LEGACY_SUITE for r in history)
    summary = RunSummary.load(old)
    assert summary.suite == LEGACY_SUITE
    assert summary.scores == [r.eval.score for r in history]
    assert summary.baseline_score == json.loads((old / "baseline_eval.json").read_text())["score"]
    assert f"scored on the {LEGACY_SUITE} suite" in _summary_table(summary)
    console = Console(file=io.StringIO(), width=200)
    show_run(old, round_index=None, console=console)
    assert "written before runs had a separate test suite" in " ".join(console.file.getvalue().split())
    assert report_run(old)


def test_a_trainers_declared_curves_are_drawn_per_round(run_dir, monkeypatch):
    import curriculum.report as report
    from curriculum.registry import TRAINERS

    history = RunDir.open(run_dir).history()
    name = sorted(set.intersection(*(set(r.train_metrics) for r in history)))[0]  # in every round
    assert RunSummary.load(run_dir).train_curves == {}  # the simulated trainer declares none
    monkeypatch.setattr(TRAINERS.get("simulated").load(), "curve_metrics", (name, "not/reported"))
    summary = RunSummary.load(run_dir)
    assert summary.train_curves[name] == [float(r.train_metrics[name]) for r in history]
    assert all(math.isnan(v) for v in summary.train_curves["not/reported"])
    drawn = {}

    def keep(fig, path):
        drawn["labels"] = [line.get_label() for line in fig.axes[0].get_lines()]
        return path

    monkeypatch.setattr(report, "_save", keep)
    report.plot_run_metrics(summary, run_dir / "unused.png")
    assert name in drawn["labels"] and "not/reported" in drawn["labels"]


def test_the_selfplay_trainer_draws_its_held_out_win_rate():
    from curriculum.registry import TRAINERS

    assert "spade/heldout_win_rate" in TRAINERS.get("selfplay").load().curve_metrics
