"""A run is quiet by default: a few lines name its config, the engines' logs and warnings go to the
run dir's ``engine.log``, and ``--verbose`` shows them on the terminal too.

Runs use the simulated learner (seconds per run) with the real MAPF testbed; a fake setup emits
what the engines emit (a vLLM INFO record, a library's warning, text on stderr and on its
descriptor, a library logger with a terminal handler of its own)."""

from __future__ import annotations

import io
import logging
import os
import sys
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.enginelog import LOG_NAME, engine_log
from trainers.simulated import SimulatedTrainer

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "mapf_simulated.yaml"
runner = CliRunner()

ENGINE_NOISE = ("vllm engine banner: KV cache 4.0 GiB", "fakelib: generation flags are not valid",
                "a library's deprecation note", "Map: 100%|##########| 8/8",
                "[W utils.cpp:68] Warning: NUMA binding (native code, on descriptor 2)")
ACTIONABLE = "simulated learner: check the learning rate"


@pytest.fixture
def noisy_setup(monkeypatch):
    """The simulated trainer's setup, emitting what engines emit when they start."""
    monkeypatch.delenv("VLLM_CONFIGURE_LOGGING", raising=False)
    monkeypatch.delenv("VLLM_LOGGING_CONFIG_PATH", raising=False)
    original = SimulatedTrainer.setup

    def setup(self, checkpoint):
        original(self, checkpoint)
        logging.getLogger("vllm.v1.engine").info(ENGINE_NOISE[0])
        library = logging.getLogger("fakelib")  # as transformers does on import: its own stderr handler
        if not library.handlers:
            library.addHandler(logging.StreamHandler())
            library.propagate = False
        library.warning(ENGINE_NOISE[1])
        warnings.warn(ENGINE_NOISE[2], FutureWarning)
        sys.stderr.write(ENGINE_NOISE[3] + "\n")
        os.write(2, (ENGINE_NOISE[4] + "\n").encode())
        logging.getLogger("trainers.simulated").warning(ACTIONABLE)

    monkeypatch.setattr(SimulatedTrainer, "setup", setup)
    yield
    logging.getLogger("fakelib").handlers.clear()


def _run(tmp_path: Path, name: str, *extra: str):
    sets = ["testbed.eval_agents=[2]", "testbed.eval_instances_per_size=1", "testbed.eval_samples=1",
            "tasks_per_round=8", "rounds=2"]
    args = ["run", "-c", str(CONFIG), "--output-dir", str(tmp_path / "runs"), "--run-name", name, *extra]
    for item in sets:
        args += ["--set", item]
    result = runner.invoke(app, args, terminal_width=400)
    assert result.exit_code == 0, result.output
    return result, tmp_path / "runs" / name


def test_a_run_names_its_config_in_a_few_lines_and_keeps_engine_logs_in_the_run_dir(tmp_path, noisy_setup):
    show_warning, root_handlers = warnings.showwarning, list(logging.getLogger().handlers)
    result, run_dir = _run(tmp_path, "quiet")
    out = result.output
    before_progress = out[:out.index(" started")].strip().splitlines()[:-1]
    head = [line for line in before_progress if ACTIONABLE not in line]
    assert len(head) <= 6, head
    assert f"config: {CONFIG}" in out
    assert "engineer: random   testbed: mapf_frozenlake   trainer: simulated" in out
    assert f"run dir: {run_dir}" in out
    assert "tasks_per_round" not in out and "eval_instances_per_size" not in out  # no config dump
    log = (run_dir / LOG_NAME).read_text()
    for line in ENGINE_NOISE:
        assert line in log, line
        assert line not in out, line
    assert ACTIONABLE in out  # the project's own warning reaches the user
    # Everything is put back for what the process does next.
    assert warnings.showwarning is show_warning and logging.getLogger().handlers == root_handlers
    assert "VLLM_CONFIGURE_LOGGING" not in os.environ


def test_verbose_shows_the_engine_logs_and_the_whole_config(tmp_path, noisy_setup):
    result, run_dir = _run(tmp_path, "loud", "--verbose")
    assert ENGINE_NOISE[0] in result.output and ENGINE_NOISE[2] in result.output
    assert "tasks_per_round: 8" in result.output
    assert ENGINE_NOISE[0] in (run_dir / LOG_NAME).read_text()


def test_a_library_terminal_handler_is_lent_to_the_log_and_given_back(tmp_path):
    terminal = io.StringIO()
    library = logging.getLogger("fakelib.engine")
    handler = logging.StreamHandler(terminal)
    library.addHandler(handler)
    library.propagate = False
    try:
        with engine_log(tmp_path) as path:
            library.warning("inside the run")
        library.warning("after the run")
    finally:
        library.removeHandler(handler)
    assert "inside the run" in path.read_text() and "inside the run" not in terminal.getvalue()
    assert "after the run" in terminal.getvalue() and "after the run" not in path.read_text()
    assert library.propagate is False
