"""End to end: real GRPO rounds (tiny model) on MAPF-FrozenLake, atomic commits, exact resume."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from curriculum.config import ConfigError, load_config
from curriculum.loop import run
from curriculum.rundir import RunDir

ROOT = Path(__file__).resolve().parents[2]


def tiny_overrides(model_dir: Path, out: Path, **extra: object) -> list[str]:
    sets = {
        "model.name_or_path": str(model_dir),
        "trainer.prompts_per_step": 2,
        "trainer.num_generations": 2,
        "trainer.max_steps_per_round": 2,
        "trainer.max_completion_length": 12,
        "trainer.beta": 0.0,
        "testbed.eval_agents": "[3]",
        "testbed.eval_instances_per_size": 1,
        "generation.max_new_tokens": 8,
        "rounds": 2,
        "tasks_per_round": 8,
        "output_dir": str(out),
        "run_name": "run",
    }
    sets.update(extra)
    return [f"{k}={v}" for k, v in sets.items()]


def empty_config(directory: Path) -> Path:
    """An empty config file: the CLI then uses the library defaults, as ``load_config(None)``
    does, instead of the machine's preset (which a run without ``--config`` gets)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "empty.yaml"
    path.write_text("{}\n")
    return path


def tree_digest(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def test_two_rounds_write_complete_round_dirs(tiny_model_dir, tmp_path):
    config = load_config(None, tiny_overrides(tiny_model_dir, tmp_path))
    result = run(config)
    assert [r.round for r in result.history] == [0, 1]
    run_dir = RunDir.open(result.run_dir)
    assert run_dir.completed_rounds() == [0, 1]
    r0 = run_dir.round_dir(0)
    for name in ("proposal.json", "train_metrics.json", "eval.json", "design.json", "state.json",
                 "checkpoint/model/config.json", "checkpoint/optimizer.pt"):
        assert (r0 / name).is_file(), name
    # The design of round 0 is exactly what round 1 trained on.
    design = json.loads((r0 / "design.json").read_text())
    assert json.loads((run_dir.round_dir(1) / "proposal.json").read_text()) == design["projected"]
    assert not (run_dir.round_dir(1) / "design.json").exists()  # no design after the last round
    assert result.history[0].train_metrics["train/steps"] == 2
    events = [json.loads(line) for line in run_dir.metrics_path.read_text().splitlines()]
    assert {e.get("event") for e in events} >= {"eval", "design", "round_committed"}


def test_resume_refuses_a_different_config(tiny_model_dir, tmp_path):
    config = load_config(None, tiny_overrides(tiny_model_dir, tmp_path, rounds=1))
    result = run(config)
    changed = load_config(None, tiny_overrides(tiny_model_dir, tmp_path, rounds=1, seed=5))
    with pytest.raises(ConfigError, match=r"seed: 0 -> 5"):
        run(changed, resume=result.run_dir)


def test_resume_matches_uninterrupted_run(tiny_model_dir, tmp_path):
    full = run(load_config(None, tiny_overrides(tiny_model_dir, tmp_path / "a", rounds=2)))
    # Run the same config in a subprocess, SIGKILL it right after round 0 is committed, resume.
    resumed = _kill_after_round(tiny_model_dir, tmp_path / "b", rounds=2, kill_when=0)
    assert [r.eval.score for r in resumed.history] == [r.eval.score for r in full.history]
    assert [r.proposal for r in resumed.history] == [r.proposal for r in full.history]


def _kill_after_round(model_dir: Path, out: Path, *, rounds: int, kill_when: int):
    sets = tiny_overrides(model_dir, out, rounds=rounds)
    cmd = [sys.executable, "-m", "curriculum.cli", "run", "--config", str(empty_config(out)),
           *sum((["--set", s] for s in sets), [])]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    run_path = out / "run"
    if run_path.exists():
        import shutil

        shutil.rmtree(run_path)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    committed = run_path / "rounds" / f"round_{kill_when:03d}"
    while not committed.is_dir():
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, "round was not committed in time"
        time.sleep(0.05)
    before = tree_digest(committed)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    run_dir = RunDir.open(run_path)
    assert run_dir.completed_rounds()[0] == kill_when
    config = run_dir.saved_config()
    result = run(config, resume=run_path)
    assert tree_digest(committed) == before, "a committed round changed during resume"
    assert not list((run_path / "rounds").glob(".round_*"))
    return result


def test_a_run_dir_in_use_is_refused(tiny_model_dir, tmp_path):
    config = load_config(None, tiny_overrides(tiny_model_dir, tmp_path, rounds=1))
    holder = RunDir.create(config)
    holder.lock()
    with pytest.raises(ConfigError, match="in use by another run"):
        RunDir.open(holder.path).lock()


def test_the_run_dir_stays_locked_while_the_run_goes(tiny_model_dir, tmp_path):
    from curriculum.console import QuietReporter

    seen: list[str] = []

    class Probe(QuietReporter):
        def round_start(self, index, total, proposal):
            try:
                RunDir.open(tmp_path / "run").lock()
                seen.append("not locked")
            except ConfigError:
                seen.append("locked")

    run(load_config(None, tiny_overrides(tiny_model_dir, tmp_path, rounds=1)), reporter=Probe())
    assert seen == ["locked"]


def test_the_loop_closes_the_testbed_also_when_a_round_fails(tmp_path, monkeypatch):
    from testbeds.mapf_frozenlake.testbed import MAPFTestbed

    closed: list[object] = []
    monkeypatch.setattr(MAPFTestbed, "close", lambda self: closed.append(self), raising=False)
    sets = ["trainer.name=simulated", "testbed.eval_agents=[3]", "testbed.eval_instances_per_size=2",
            "tasks_per_round=16", "rounds=2", f"output_dir={tmp_path}"]
    run(load_config(None, [*sets, "run_name=ok"]))
    assert len(closed) == 1

    def broken_eval(self, policy, *, seed=0, suite="validation"):
        raise RuntimeError("eval failed")

    monkeypatch.setattr(MAPFTestbed, "evaluate", broken_eval)
    with pytest.raises(RuntimeError, match="eval failed"):
        run(load_config(None, [*sets, "run_name=broken"]))
    assert len(closed) == 2


def test_a_bf16_round_trains_and_keeps_fp32_weights(tiny_model_dir, tmp_path):
    """trainer.bf16=true (autocast) runs the warm start, GRPO and the eval end to end on a CPU,
    whatever the CPU (without native bf16 it is only slow), and saves fp32 weights."""
    import torch
    from safetensors.torch import load_file

    config = load_config(None, tiny_overrides(tiny_model_dir, tmp_path, rounds=1, **{
        "trainer.bf16": "true", "trainer.warmstart.steps": 1, "trainer.warmstart.batch_size": 2,
        "trainer.warmstart.cache": "false"}))
    result = run(config)
    assert result.history[0].train_metrics["train/steps"] == 2
    weights = load_file(next((RunDir.open(result.run_dir).path).rglob("model.safetensors")))
    assert {t.dtype for t in weights.values()} == {torch.float32}
