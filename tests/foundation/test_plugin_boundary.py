"""The controller asks plugins, it does not name them: each question is a method on a base type.

* ``--dry-run``: ``Trainer.training_budget`` (a ``TrainingBudget``) and ``Trainer.plan_lines``;
* ``curriculum compare`` without ``--config``: ``Testbed.compare_config``;
* ``curriculum show --envs``: ``Engineer.run_view``;
* plugin sub-commands: ``commands`` on a registry entry, mounted by ``curriculum.cli``;
* what reports draw and tabulate: ``Testbed.report_layout`` (``curriculum.core.reporting``);
* which training metrics a round summary adds: ``Trainer.summary_metrics``.

Nor do they speak a plugin's vocabulary: the kernel's files name no shipped plugin, and the
controller's at most ``CONTROLLER_LIMIT`` lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.compare import CompareSpec, _default_config
from curriculum.config import load_config
from curriculum.core.budget import TrainingBudget
from curriculum.core.commands import CommandHost
from curriculum.registry import ENGINEERS, TESTBEDS, TRAINERS, PluginError, load_commands, mounted_commands

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

PLUGIN_VOCABULARY = re.compile(r"mapf|frozenlake|spade", re.IGNORECASE)
"""Names of shipped plugins and their domains (the ``grep -rniE`` of the boundary)."""
CONTROLLER_LIMIT = 3
"""Most lines of the controller (``curriculum/*.py``) that may name one."""


def _vocabulary_lines(files: list[Path]) -> list[str]:
    """``path:line: text`` of every line of ``files`` that names a plugin's vocabulary."""
    return [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
            for path in files for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
            if PLUGIN_VOCABULARY.search(line)]


def test_the_kernel_and_the_controller_speak_no_plugins_vocabulary():
    kernel = [p for p in sorted((ROOT / "curriculum" / "core").rglob("*"))
              if p.is_file() and "__pycache__" not in p.parts]
    assert kernel and not _vocabulary_lines(kernel), "\n".join(_vocabulary_lines(kernel))
    controller = _vocabulary_lines(sorted((ROOT / "curriculum").glob("*.py")))
    assert len(controller) <= CONTROLLER_LIMIT, "\n".join(controller)


def test_reports_read_the_testbeds_declared_layout():
    from curriculum.core.reporting import ReportLayout, natural_key
    from curriculum.report import layout_of, rates_by_bucket

    mapf = layout_of("mapf_frozenlake")
    assert [(r.name, r.metric) for r in mapf.rates] == [("valid", "valid_rate"), ("optimal", "optimal_rate")]
    assert mapf.bucket_label == "map size" and mapf.group_label("3agents") == "3 agents"
    assert mapf.rates_title == "valid and optimal rate"
    levels = layout_of("reasoning_gym")
    assert [r.metric for r in levels.rates] == ["accuracy"] and levels.bucket_label == "task level"
    assert layout_of("spade_pool").rates == () and layout_of("no_such_testbed") == ReportLayout(bucket_label="bucket")
    metrics = {"valid_rate/3agents/10x10": 0.5, "valid_rate/3agents/3x3": 1.0, "valid_rate/4agents/3x3": 0.0,
               "accuracy/gcd/L10": 0.25, "accuracy/gcd/L2": 0.75, "failure_rate/3agents/hole_free": 0.5}
    assert list(rates_by_bucket(metrics, "valid_rate", mapf).items()) == [("3x3", 0.5), ("10x10", 0.5)]
    assert list(rates_by_bucket(metrics, "accuracy", levels)) == ["gcd:2", "gcd:10"]
    assert sorted(["10x10", "3x3", "gcd:10", "gcd:2"], key=natural_key) == ["3x3", "10x10", "gcd:2", "gcd:10"]


def test_shipped_plugins_declare_their_commands_and_each_builds_a_typer_app():
    mounted = {name: (entry.kind, entry.name) for name, entry, _ in mounted_commands()}
    assert mounted == {"mapf": ("testbed", "mapf_frozenlake"), "sandbox": ("testbed", "spade_pool"),
                       "spade": ("engineer", "spade")}
    host = CommandHost(run_history=lambda run_dir: [])
    for _, entry, target in mounted_commands():
        assert isinstance(load_commands(entry, target)(host), typer.Typer)
    help_text = runner.invoke(app, ["--help"]).output
    assert all(name in help_text for name in mounted)


def test_a_command_name_two_plugins_claim_is_refused():
    TRAINERS.register("clashing", "trainers.simulated:SimulatedTrainer", "trainers.simulated:SimulatedConfig",
                      "test", trains_on="bucketed", commands={"mapf": "trainers.simulated:nothing"})
    try:
        with pytest.raises(PluginError, match="command 'mapf' is declared by testbed 'mapf_frozenlake' and by "
                                              "trainer 'clashing'"):
            mounted_commands()
    finally:
        TRAINERS.unregister("clashing")


def test_trainers_state_their_round_budget():
    simulated = load_config(ROOT / "configs/mapf_simulated.yaml")
    assert TRAINERS.get("simulated").load().training_budget(simulated) == TrainingBudget()
    grpo = load_config(ROOT / "configs/mapf_cpu_demo.yaml", ["trainer.beta=0.04"])
    budget = TRAINERS.get("grpo").load().training_budget(grpo)
    assert budget.trains_model and budget.reference_model and budget.round.trained > 0
    no_kl = load_config(ROOT / "configs/mapf_cpu_demo.yaml", ["trainer.beta=0"])
    assert not TRAINERS.get("grpo").load().training_budget(no_kl).reference_model


def test_compare_takes_the_testbeds_shipped_config_for_the_trainer():
    assert _default_config(CompareSpec(engineers=["random"], trainer="simulated")) == ROOT / "configs/mapf_simulated.yaml"
    assert _default_config(CompareSpec(engineers=["random"], trainer="small")) == ROOT / "configs/mapf_small.yaml"
    assert _default_config(CompareSpec(engineers=["random"], testbed="reasoning_gym", trainer="simulated")) == \
        ROOT / "configs/reasoning_gym_simulated.yaml"
    assert _default_config(CompareSpec(engineers=["random"], testbed="reasoning_gym", trainer="grpo")) is None
    assert _default_config(CompareSpec(engineers=["random"])) is None
    assert _default_config(CompareSpec(engineers=["random"], testbed="no_such", trainer="simulated")) is None
    for entry in TESTBEDS.entries():
        for trainer in TRAINERS.names():
            path = entry.load().compare_config(trainer)
            assert path is None or path.is_file(), (entry.name, trainer, path)


def _run_dir(tmp_path: Path, engineer: str) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"engineer": {"name": engineer}}))
    return run


def test_show_envs_asks_the_runs_engineer(tmp_path):
    from engineers.spade.memory import Memory

    run = _run_dir(tmp_path, "spade")
    memory = Memory.in_run_dir(run)
    memory.record(hash="abc123def456", round=0, setting="games", skill="counting", hint="count", program="x = 1",
                  admitted=True)
    memory.close()
    listing = runner.invoke(app, ["show", str(run), "--envs"])
    assert listing.exit_code == 0 and "SPADE environments (1 admitted, 0 played / 1)" in listing.output
    one = runner.invoke(app, ["show", str(run), "--env", "abc1"])
    assert one.exit_code == 0 and "x = 1" in one.output


def test_show_envs_of_an_engineer_that_keeps_none_is_a_clear_error(tmp_path):
    assert ENGINEERS.get("random").load().run_view(tmp_path) is None
    result = runner.invoke(app, ["show", str(_run_dir(tmp_path, "random")), "--envs"])
    assert result.exit_code != 0 and "its engineer 'random' keeps no environments" in result.output
