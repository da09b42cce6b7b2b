"""The controller asks plugins, it does not name them: each question is a method on a base type.

* ``--dry-run``: ``Trainer.training_budget`` (a ``TrainingBudget``) and ``Trainer.plan_lines``;
* ``curriculum compare`` without ``--config``: ``Testbed.compare_config``;
* ``curriculum show --envs``: ``Engineer.run_view``;
* plugin sub-commands: ``commands`` on a registry entry, mounted by ``curriculum.cli``.
"""

from __future__ import annotations

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
