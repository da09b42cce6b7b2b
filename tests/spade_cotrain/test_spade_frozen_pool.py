"""The fixed-environment GRPO baseline through the controller (tiny model, real sandbox, the
skill-scripted designer and agent): the spade engineer with ``frozen_pool`` designs the pool
before round 0, saves it in the run directory, every round trains the agent on exactly that pool,
and neither a restart before round 0 nor a resume designs it again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from spade_loop_fakes import DESIGN_BY_SKILL, FIXTURES, ScriptedDesignSelfPlayTrainer, register

from curriculum.config import validate_config
from curriculum.core.pool import program_hash
from testbeds.spade.saved_pool import load_pool
from curriculum.loop import run
from curriculum.rundir import RunDir
from engineers.spade.engineer import ROUNDS_LOG
from engineers.spade.memory import Memory


def _config(tiny_model_dir: Path, out: Path, rounds: int, **frozen) -> dict:
    return {
        "model": {"name_or_path": str(tiny_model_dir)},
        "trainer": {"name": "selfplay_scripted_designs", "learning_rate": 0.01, "beta": 0.0, "micro_batch_size": 8,
                    "torch_threads": 1, "play": {"episodes_per_condition": 2, "max_turns": 2},
                    "pool": {"envs_per_step": 2, "max_plays": 10, "pool_size": 3}, "sandbox": {"workers": 1}},
        "testbed": {"name": "spade_pool", "setting": "games", "eval_every": 100,
                    "reasoning_gym": {"datasets": {"maths": ["basic_arithmetic"]}, "per_dataset": 1,
                                      "max_new_tokens": 2}},
        "engineer": {"name": "spade", "setting": "games", "skills": list(DESIGN_BY_SKILL), "corpus": "none",
                     "diversity": {"embedding": "tfidf"}, "sandbox": {"workers": 1},
                     "frozen_pool": {"size": 3, "max_calls": 8, "batch": 4} | frozen},
        "generation": {"max_new_tokens": 2, "batch_size": 2},
        "rounds": rounds, "tasks_per_round": 1, "seed": 3, "output_dir": str(out), "run_name": "frozen",
    }


def _admissible() -> list[str]:
    """Hashes of the skill-scripted designer's admissible designs (skills s0, s2, s3; s1 writes a
    syntax error), in call order."""
    from engineers.spade.parse import parse_design

    return [program_hash(parse_design((FIXTURES / DESIGN_BY_SKILL[s]).read_text()).program) for s in ("s0", "s2", "s3")]


def _design_calls(run_dir: Path) -> int:
    memory = Memory.in_run_dir(run_dir)
    try:
        return len(memory.entries())
    finally:
        memory.close()


def _steps(run_dir: Path) -> list[dict]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r.get("event") == "spade_step"]


def test_pool_designed_once_saved_with_the_run_and_kept(tiny_model_dir, tmp_path, monkeypatch):
    pytest.importorskip("reasoning_gym")
    register()
    out = tmp_path / "runs"
    run_dir = out / "frozen"

    def killed(self, *args, **kwargs):
        raise RuntimeError("killed during round 0")

    # a run killed in round 0's training: the pool is designed and saved, no round is committed
    with monkeypatch.context() as patch:
        patch.setattr(ScriptedDesignSelfPlayTrainer, "train_round", killed)
        with pytest.raises(RuntimeError, match="killed during round 0"):
            run(validate_config(_config(tiny_model_dir, out, rounds=1)))
    assert [e.hash for e in load_pool(run_dir)] == _admissible()
    assert _design_calls(run_dir) == 4 and RunDir.open(run_dir).history() == []

    # the restart rereads the saved pool; the extension after round 0 hands the same pool on
    run(validate_config(_config(tiny_model_dir, out, rounds=1)), resume=run_dir)
    history = run(validate_config(_config(tiny_model_dir, out, rounds=2)), resume=run_dir).history
    assert _design_calls(run_dir) == 4  # one batch of four calls, made once
    assert len((run_dir / ROUNDS_LOG).read_text().splitlines()) == 1
    assert [[e["hash"] for e in h.proposal["environments"]] for h in history] == [_admissible()] * 2
    assert all(h.proposal["designs"] == [] for h in history)
    steps = _steps(run_dir)
    assert [s["round"] for s in steps] == [0, 1]
    assert all(s["spade/designs"] == 0 and s["spade/designer_rows"] == 0 and s["spade/agent_rows"] > 0 for s in steps)
    initial = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
               if '"initial_design"' in line]
    assert len(initial) == 2  # the first start designed, the restart reread


def test_too_small_pool_stops_the_run_before_round0(tiny_model_dir, tmp_path):
    """Three admissible programs (the designer repeats itself) cannot fill a pool of four."""
    pytest.importorskip("reasoning_gym")
    from engineers.spade.engineer import FrozenPoolTooSmall

    register()
    config = validate_config(_config(tiny_model_dir, tmp_path / "runs", rounds=1, size=4))
    with pytest.raises(FrozenPoolTooSmall, match="admitted 3 of the 4 environments .* in 8 design calls"):
        run(config)
    assert RunDir.open(tmp_path / "runs" / "frozen").history() == []
