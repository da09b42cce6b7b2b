"""Two CPU processes under ``accelerate launch`` (gloo): identical weights, rank-0 writes, resume."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from launch_helpers import accelerate_launch, kill_tree

from curriculum.rundir import RunDir

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def empty_config(directory: Path) -> Path:
    """Library defaults instead of the machine's preset (which a run without --config gets)."""
    path = directory.parent / f"{directory.name}-empty.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}\n")
    return path


def _command(model_dir: Path, out: Path, resume: bool) -> list[str]:
    sets = {
        "model.name_or_path": str(model_dir),
        "trainer.prompts_per_step": 2, "trainer.num_generations": 2, "trainer.max_steps_per_round": 2,
        "trainer.max_completion_length": 12, "trainer.beta": 0.0,
        "testbed.eval_agents": "[3]", "testbed.eval_instances_per_size": 1,
        "generation.max_new_tokens": 8, "rounds": 2, "tasks_per_round": 8,
        "output_dir": str(out), "run_name": "mp",
    }
    cmd = accelerate_launch() + ["-m", "curriculum.cli", "run", "--config", str(empty_config(out))]
    for key, value in sets.items():
        cmd += ["--set", f"{key}={value}"]
    if resume:
        cmd += ["--resume", str(out / "mp")]
    return cmd


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": "1"}


def _digest_events(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == "rank_weight_digests"]


def test_two_processes_two_rounds_then_kill_and_resume(tiny_model_dir, tmp_path):
    out = tmp_path / "runs"
    # First launch: kill the whole process group as soon as round 0 is committed.
    proc = subprocess.Popen(_command(tiny_model_dir, out, resume=False), cwd=ROOT, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    committed = out / "mp" / "rounds" / "round_000"
    deadline = time.monotonic() + 400
    while not committed.is_dir():
        if proc.poll() is not None:
            pytest.fail(proc.stderr.read().decode()[-4000:])
        assert time.monotonic() < deadline, "round 0 was not committed in time"
        time.sleep(0.1)
    kill_tree(proc.pid)
    proc.wait()
    round0 = {p.name: p.read_bytes() for p in committed.glob("*.json")}

    resumed = subprocess.run(_command(tiny_model_dir, out, resume=True), cwd=ROOT, env=_env(),
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    run_dir = RunDir.open(out / "mp")
    assert run_dir.completed_rounds() == [0, 1]
    assert {p.name: p.read_bytes() for p in committed.glob("*.json")} == round0
    # After every round both ranks hold identical weights.
    events = _digest_events(out / "mp")
    assert {e["round"] for e in events} >= {0, 1}
    for event in events:
        assert len(event["digests"]) == 2 and len(set(event["digests"])) == 1, event
    # Only rank 0 writes: one commit event per round, one set of round files, no stray dirs.
    commits = [e for e in map(json.loads, (out / "mp" / "metrics.jsonl").read_text().splitlines())
               if e.get("event") == "round_committed"]
    assert [c["round"] for c in commits] == [0, 1]
    assert sorted(p.name for p in (out / "mp" / "rounds").iterdir()) == ["round_000", "round_001"]
    assert sorted(p.name for p in out.iterdir()) == ["mp"]
    shutil.rmtree(out)
