"""``curriculum spade export``: a run's admitted environments as a pool, with lineage and regret
history, that a fresh run trains on through ``testbed.initial_pool: memory:DIR``."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cotrain_fakes import ScriptedTurnModel
from spade_loop_fakes import design_pool

from curriculum.config import validate_config
from curriculum.core.pool import EnvOutcome
from curriculum.core.types import EvalReport
from curriculum.rundir import RunDir
from curriculum.rundir import write_json
from engineers.spade.cli import export_pool
from engineers.spade.memory import Memory
from testbeds.spade.saved_pool import load_pool

ROOT = Path(__file__).resolve().parents[2]


def _designed_run(run_dir: Path) -> list:
    """A run directory as a SPADE run leaves it: the memory (two admitted environments, the second
    a mutation of the first, one rejected design) and two committed rounds with their plays."""
    _, envs = design_pool(0)
    guess, easy = envs[0], envs[1]
    memory = Memory.in_run_dir(run_dir)
    memory.record(hash=guess.hash, round=0, setting="games", skill=guess.skill, hint=guess.hint,
                  program=guess.program, admitted=True, corpus_doc_id="doc-7",
                  extra={"checks_passed": ["syntax", "reset", "step"], "admission_seconds": 0.5})
    memory.record(hash=easy.hash, round=1, setting="games", skill=easy.skill, hint=easy.hint, program=easy.program,
                  admitted=True, parent=guess.hash, extra={"checks_passed": ["syntax"]})
    memory.record(hash="rejected", round=1, setting="games", skill="logic", hint="", program="def broken(",
                  admitted=False, reason="syntax_error")
    memory.close()
    for index, regret in ((0, 0.25), (1, 0.5)):
        directory = run_dir / "rounds" / f"round_{index:03d}"
        directory.mkdir(parents=True)
        write_json(directory / "proposal.json", {})
        write_json(directory / "train_metrics.json", {})
        write_json(directory / "eval.json", EvalReport(score=0.0, metrics={}).model_dump(mode="json"))
        outcome = EnvOutcome(env_id=guess.hash, skill=guess.skill, win_rate=0.5 - regret / 2, win_rate_hint=0.5 + regret / 2,
                             mean_return=0.5 - regret / 2, mean_return_hint=0.5 + regret / 2, regret=regret,
                             raw_regret=regret)
        write_json(directory / "env_outcomes.json", [outcome.model_dump(mode="json")])
    return [guess, easy]


def test_export_writes_every_admitted_environment_with_lineage_and_history(tmp_path):
    guess, easy = _designed_run(tmp_path / "run")
    manifest = export_pool(tmp_path / "run", tmp_path / "pool", RunDir(tmp_path / "run").history())
    assert manifest["environments"] == 2 and manifest["format"] == "curriculum-spade-pool" and manifest["version"] == 1
    assert json.loads((tmp_path / "pool" / "manifest.json").read_text()) == manifest
    rows = [json.loads(line) for line in (tmp_path / "pool" / "environments.jsonl").read_text().splitlines()]
    assert [r["hash"] for r in rows] == [guess.hash, easy.hash]  # the rejected design is not exported
    first, second = rows
    assert first["hint"] == guess.hint and first["program"] == guess.program and first["skill"] == guess.skill
    assert first["admission"]["checks_passed"] == ["syntax", "reset", "step"]
    assert first["lineage"] == {"parent": None, "ancestors": [], "corpus_doc_id": "doc-7"}
    assert second["lineage"]["parent"] == guess.hash and second["lineage"]["ancestors"] == [guess.hash]
    assert [(h["round"], h["regret"]) for h in first["history"]] == [(0, 0.25), (1, 0.5)]
    assert second["history"] == []
    assert [e.hash for e in load_pool(tmp_path / "pool")] == [guess.hash, easy.hash]
    with pytest.raises(ValueError, match="already holds"):
        export_pool(tmp_path / "run", tmp_path / "pool", RunDir(tmp_path / "run").history())
    with pytest.raises(FileNotFoundError, match="no SPADE environment memory"):
        export_pool(tmp_path / "empty", tmp_path / "pool2", RunDir(tmp_path / "empty").history())


def test_cli_export(tmp_path):
    _designed_run(tmp_path / "run")
    proc = subprocess.run([sys.executable, "-m", "curriculum.cli", "spade", "export", str(tmp_path / "run"),
                           "--out", str(tmp_path / "pool")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "exported 2 environments" in proc.stdout and "initial_pool=memory:" in proc.stdout


def test_a_fresh_run_trains_on_an_exported_pool(tmp_path, tiny_model_dir):
    """Round trip: export, then the fixed-environment baseline (``spade_pool`` with the exported
    pool as ``initial_pool``, the ``fixed`` engineer) plays and trains on exactly those programs."""
    from curriculum.registry import TESTBEDS
    from trainers.selfplay.trainer import SelfPlayTrainer

    envs = _designed_run(tmp_path / "run")
    export_pool(tmp_path / "run", tmp_path / "pool", RunDir(tmp_path / "run").history())
    config = validate_config({
        "model": {"name_or_path": str(tiny_model_dir)},
        "trainer": {"name": "selfplay", "learning_rate": 0.01, "beta": 0.0, "designer_delay": 1,
                    "micro_batch_size": 8, "torch_threads": 1,
                    "play": {"episodes_per_condition": 3, "max_turns": 2}, "pool": {"envs_per_step": 2}},
        "testbed": {"name": "spade_pool", "setting": "games", "initial_pool": f"memory:{tmp_path / 'pool'}"},
        "engineer": {"name": "fixed"}, "rounds": 1, "seed": 3, "output_dir": str(tmp_path / "runs"),
    })
    testbed = TESTBEDS.get("spade_pool").load()(config.testbed)
    proposal = testbed.initial_proposal(np.random.default_rng(0))
    assert [e.hash for e in proposal.environments] == [e.hash for e in envs]
    tasks = testbed.sample(proposal, 1, seed=0)
    trainer = SelfPlayTrainer(config, testbed=testbed)
    trainer.setup(None)
    trainer.turn_model = ScriptedTurnModel()
    try:
        metrics = trainer.train_round(tasks, round_index=0, seed=5)
    finally:
        trainer.close()
    assert set(trainer.last_env_results) == {e.hash for e in envs}
    assert metrics["spade/designs"] == 0.0 and metrics["train/steps"] == 1.0
    assert metrics["spade/agent_rows"] == 2 * 3
