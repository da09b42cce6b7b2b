"""Mission commands run as typed: the resolved plugins, the machine's preset and why, a time estimate."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.presets import Choice, Machine, all_presets, choose_preset, detect_machine

runner = CliRunner()


def _dry_run(*args: str, env: dict[str, str] | None = None):
    result = runner.invoke(app, ["run", *args, "--dry-run"], terminal_width=400, env=env)
    return result.exit_code, result.output


def test_every_preset_file_exists_and_names_its_testbed_and_trainer():
    from curriculum.config import read_config_file

    for preset in all_presets():
        data = read_config_file(preset.path)
        assert data["testbed"]["name"] == preset.testbed and data["trainer"]["name"] == preset.trainer, preset.file
        if preset.engineer is not None:
            assert data["engineer"]["name"] == preset.engineer, preset.file


def test_spade_alone_means_the_pool_testbed_and_the_selfplay_trainer_with_a_cpu_preset():
    code, out = _dry_run("--engineer", "spade", "--machine", "cpu")
    assert code == 0, out
    assert "preset: configs/spade_games_cpu_demo.yaml" in out and "forced by --machine=cpu" in out
    assert "testbed: spade_pool   engineer: spade   trainer: selfplay" in out
    assert "estimated wall time on this machine:" in out
    assert out.index("preset:") < out.index("model:")  # printed before the config


def test_checkpoint_on_mapf_gets_the_checkpoint_cpu_preset_on_cpu_and_the_paper_on_gpu():
    code, out = _dry_run("--engineer", "checkpoint", "--testbed", "mapf_frozenlake", "--machine", "cpu")
    assert code == 0, out
    assert "preset: configs/mapf_checkpoint_cpu_demo.yaml" in out and "optimizer steps per round: 2 " in out
    assert "(max 128 per sample)" in out and "structured_output: true" in out  # the demo recipe, answers constrained
    code, out = _dry_run("--engineer", "checkpoint", "--testbed", "mapf_frozenlake", "--machine", "gpu")
    assert code == 0, out
    assert "preset: configs/mapf_qwen3_4b.yaml" in out and "Qwen/Qwen3-4B" in out


def test_checkpoint_on_reasoning_gym_gets_the_cpu_demo_on_cpu_and_qwen3_on_gpu():
    code, out = _dry_run("--engineer", "checkpoint", "--testbed", "reasoning_gym", "--machine", "cpu")
    assert code == 0, out
    assert "preset: configs/reasoning_gym_cpu_demo.yaml — the checkpoint engineer on reasoning_gym" in out
    assert "embedded:smollm2-135m-instruct" in out
    code, out = _dry_run("--engineer", "checkpoint", "--testbed", "reasoning_gym", "--machine", "gpu")
    assert code == 0, out
    assert "preset: configs/reasoning_gym_qwen3_4b.yaml" in out and "Qwen/Qwen3-4B" in out
    assert choose_preset("plr", "reasoning_gym", "simulated", "cpu").file == "reasoning_gym_simulated.yaml"


def test_a_generic_preset_runs_the_engineer_asked_for():
    code, out = _dry_run("--engineer", "optuna", env={"CURRICULUM_MACHINE": "cpu"})
    assert code == 0, out
    assert "configs/mapf_cpu_demo.yaml" in out and "with engineer optuna in place of the file's" in out
    assert "engineer: optuna   trainer: grpo" in out and "forced by CURRICULUM_MACHINE=cpu" in out


def test_a_config_file_wins_over_presets():
    code, out = _dry_run("-c", "configs/mapf_simulated.yaml")
    assert code == 0, out
    assert "preset:" not in out and "trainer: simulated" in out


def test_a_misfit_exits_nonzero_naming_both():
    result = runner.invoke(app, ["run", "--engineer", "frontier", "--testbed", "spade_pool"], terminal_width=400)
    assert result.exit_code == 2
    assert "engineer 'frontier'" in result.output and "testbed 'spade_pool'" in result.output
    assert "Traceback" not in result.output


def test_choose_preset_prefers_the_engineers_own_then_the_testbeds():
    assert choose_preset("checkpoint", "mapf_frozenlake", "grpo", "cpu").file == "mapf_checkpoint_cpu_demo.yaml"
    assert choose_preset("optuna", "mapf_frozenlake", "grpo", "gpu").file == "mapf_qwen3_4b_baseline.yaml"
    assert choose_preset("checkpoint", "mapf_frozenlake", "simulated", "gpu").file == "mapf_simulated.yaml"
    assert choose_preset("fixed", "spade_pool", "selfplay", "cpu").file == "spade_games_cpu_demo.yaml"


def test_machine_detection(monkeypatch):
    monkeypatch.delenv("CURRICULUM_MACHINE", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert detect_machine().kind == "cpu" and "hides every GPU" in detect_machine().reason
    assert detect_machine("gpu").kind == "gpu"
    monkeypatch.setenv("CURRICULUM_MACHINE", "gpu")
    assert detect_machine("auto").reason == "forced by CURRICULUM_MACHINE=gpu"
    assert detect_machine("cpu").kind == "cpu"  # the flag wins over the environment
    with pytest.raises(ValueError, match="cpu, gpu or auto"):
        detect_machine("tpu")


def test_the_printed_preset_line_quotes_the_resolved_budget_not_a_description():
    """The budget in the preset line comes from the resolved config (a hand-written summary had
    drifted from its file), so a --rounds flag shows up in it too."""
    from curriculum.config import load_config

    for preset in all_presets():
        cfg = load_config(preset.path, [])
        choice = Choice(preset, Machine("cpu", "test", 2), preset.engineer or "fixed")
        assert f"{cfg.rounds} rounds of {cfg.tasks_per_round} tasks" in choice.explain(cfg), preset.file
    code, out = _dry_run("--engineer", "spade", "--machine", "cpu", "--rounds", "7")
    assert code == 0, out
    assert "7 rounds of 64 tasks" in out.splitlines()[0]
