"""The CPU demo end to end through the CLI with the embedded SmolLM2-135M as learner and engineer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.rundir import RunDir
from testbeds.mapf_frozenlake.config import GeneratorConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.real_model
@pytest.mark.slow
def test_cpu_demo_runs_end_to_end_and_show_prints_each_round(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--engineer", "checkpoint", "--testbed", "mapf_frozenlake",
                                 "--config", str(ROOT / "configs/mapf_checkpoint_cpu_demo.yaml"),
                                 "--output-dir", str(tmp_path), "--run-name", "demo"])
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "demo"
    rd = RunDir.open(run_dir)
    rounds = rd.completed_rounds()
    assert rounds == [0, 1, 2]
    for index in rounds[:-1]:
        design = json.loads((rd.round_dir(index) / "design.json").read_text())
        GeneratorConfig.model_validate(design["projected"])  # legal, whatever the model wrote
        assert design["projected"] == json.loads((rd.round_dir(index + 1) / "proposal.json").read_text())
        assert design["design"]["output"], "the engineer model produced no text"
        assert design["diagnostics"]["context"] == ["F", "G", "H", "T"]
        shown = runner.invoke(app, ["show", str(run_dir), "--round", str(index)])
        assert shown.exit_code == 0, shown.output
        for fragment in ("## F. Failure breakdown", "## T. Training details", "raw output",
                         "parsed proposal", "projected proposal", "project's changes", "diagnostics"):
            assert fragment in shown.output, fragment
