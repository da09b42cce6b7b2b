"""The checkpoint engineer beside the small learner: ``engineer.model: local`` asks a frozen chat
model that the run does not train (the small learner cannot write a proposal), loaded once per
process, decoding under the answer schema; without a loader it says what is missing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from curriculum.config import load_config
from curriculum.loop import run
from curriculum.rundir import RunDir
from engineers.base import DesignContext
from engineers.checkpoint.config import CheckpointEngineerConfig
from engineers.checkpoint.engineer import CheckpointEngineer
from testbeds.mapf_frozenlake.testbed import MAPFTestbed

pytest.importorskip("llguidance")


def small_checkpoint_run(tiny_model_dir, tmp_path, name: str):
    sets = {
        "trainer.name": "small", "testbed.name": "mapf_frozenlake", "engineer.name": "checkpoint",
        "engineer.model": "local", "engineer.local.name_or_path": str(tiny_model_dir),
        "engineer.answer_reasoning_chars": 20, "engineer.answer_summary_chars": 20,
        "trainer.max_steps_per_round": 1, "trainer.prompts_per_step": 2, "trainer.num_generations": 2,
        "trainer.warmstart.steps": 2, "trainer.warmstart.examples": 16, "trainer.warmstart.cache": "false",
        "testbed.train_agents": 2, "testbed.eval_agents": "[2]", "testbed.eval_sizes": "[3x3]",
        "testbed.warmstart_sizes": "[3x3]", "testbed.warmstart_agents": "[2]",
        "testbed.eval_instances_per_size": 2, "rounds": 3, "tasks_per_round": 4,
        "output_dir": str(tmp_path), "run_name": name,
    }
    return run(load_config(None, [f"{k}={v}" for k, v in sets.items()]))


def test_the_local_model_answers_under_the_schema_and_is_loaded_once(tiny_model_dir, tmp_path, monkeypatch):
    from trainers.lm import chat

    loads: list[str] = []
    real_load = chat._load
    monkeypatch.setattr(chat, "_LOADED", {})
    monkeypatch.setattr(chat, "_load", lambda model, generation: loads.append(model.name_or_path)
                        or real_load(model, generation))
    result = small_checkpoint_run(tiny_model_dir, tmp_path, "a")
    rd = RunDir.open(result.run_dir)
    for index in (0, 1):  # the last round designs nothing
        d = json.loads((rd.round_dir(index) / "design.json").read_text())["diagnostics"]
        assert d["engineer_model"] == "local" and d["constrained"] is True and d["parsed"] is True
    assert d["usable_so_far"] == "2/2"
    # A second run in the same process reuses the loaded model.
    small_checkpoint_run(tiny_model_dir, tmp_path, "b")
    assert loads == [str(tiny_model_dir)]


def test_local_without_a_loader_names_what_is_missing():
    testbed = MAPFTestbed()
    engineer = CheckpointEngineer(CheckpointEngineerConfig(model="local"))
    ctx = DesignContext(round=0, total_rounds=2, history=[], proposal=testbed.initial_proposal(np.random.default_rng(0)),
                        testbed=testbed, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="engineer.model=local needs the trainer's chat_model"):
        engineer.engineer_policy(ctx)


@pytest.mark.parametrize("trainer", ["small", "simulated"])
def test_asking_a_policy_that_writes_no_text_is_refused_when_the_config_loads(trainer, tmp_path):
    from typer.testing import CliRunner

    from curriculum.cli import app
    from curriculum.config import ConfigError

    overrides = [f"trainer.name={trainer}", "testbed.name=mapf_frozenlake", "engineer.name=checkpoint",
                 f"output_dir={tmp_path}", "run_name=r"]
    with pytest.raises(ConfigError, match="engineer.model=checkpoint asks the trained policy .* set engineer.model=local"):
        load_config(None, overrides)
    out = CliRunner().invoke(app, ["run", "--engineer", "checkpoint", "--trainer", trainer, "--dry-run",
                                   "--output-dir", str(tmp_path), "--run-name", "r"])
    assert out.exit_code != 0 and "set engineer.model=local" in " ".join(out.output.split())  # a dry run says so too
    assert not (tmp_path / "r").exists()
    load_config(None, [*overrides, "engineer.model=local"])  # the way out it names is accepted
