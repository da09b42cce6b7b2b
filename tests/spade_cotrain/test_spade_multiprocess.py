"""SPADE co-training in two CPU processes (gloo, tiny model, scripted designer and agent): plays
sharded over the ranks, one update over the global batch, identical weights on both ranks after
every step, and a SIGKILL of the whole process tree mid-run resumes to the records (and weights)
of an uninterrupted two-process run."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "scale"))
from launch_helpers import ROOT, accelerate_launch, kill_tree  # noqa: E402
from spade_loop_fakes import DESIGN_BY_SKILL, FIXTURES  # noqa: E402

from curriculum.loop import derive_seed  # noqa: E402
from trainers.selfplay.play import episode_seeds  # noqa: E402

pytestmark = pytest.mark.slow
VOLATILE = ("seconds", "runtime", "per_second", "time", "timestamp", "wall")
SEED, G, ROUNDS = 5, 2, 3
WAIT_S = 1800
"""Longest wait for one launch (or round 0's commit): a hang fails, slowness on a loaded box does not
(each launch is about 15-40 s of CPU time; on a box at load 20 one took 17 minutes)."""


def _config(tiny_model_dir: Path, out: Path, name: str) -> dict:
    return {
        "model": {"name_or_path": str(tiny_model_dir)},
        "trainer": {"name": "selfplay_scripted", "learning_rate": 0.01, "beta": 0.0, "designer_delay": 1,
                    "micro_batch_size": 8, "torch_threads": 1,
                    "play": {"episodes_per_condition": G, "max_turns": 2},
                    "pool": {"envs_per_step": 3, "max_plays": 2}, "sandbox": {"workers": 1}},
        "testbed": {"name": "spade_pool", "setting": "games", "eval_every": 100, "final_eval_call": ROUNDS - 1,
                    "reasoning_gym": {"datasets": {"maths": ["basic_arithmetic"]}, "per_dataset": 1,
                                      "max_new_tokens": 2}},
        "engineer": {"name": "spade_scripted"},
        "generation": {"max_new_tokens": 2, "batch_size": 2},
        "rounds": ROUNDS, "tasks_per_round": 1, "seed": SEED, "output_dir": str(out), "run_name": name,
    }


@pytest.fixture
def launch():
    """Starts ``run_scripted.py`` under a two-process ``accelerate launch``; every process tree it
    started is SIGKILLed when the test ends, so a failing test leaves no workers behind."""
    started: list[subprocess.Popen] = []

    def _launch(config_path: Path, resume: Path | None = None) -> subprocess.Popen:
        cmd = accelerate_launch() + [str(HERE / "run_scripted.py"), str(config_path)] + ([str(resume)] if resume else [])
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "TRL_EXPERIMENTAL_SILENCE": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}  # this checkout
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=env, start_new_session=True)
        started.append(proc)
        return proc

    yield _launch
    for proc in started:
        if proc.poll() is None:
            kill_tree(proc.pid)
            proc.wait()


def _events(run_dir: Path, *names: str) -> list[dict]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not any(s in k for s in VOLATILE)}
            for r in records if r.get("event") in names]


def _expected_win_rate(step: int) -> float:
    """Step t plays guess-t, easy-t, guess2-t (indices 0, 1, 2 of the play set; rank 0 plays 0 and
    2, rank 1 plays 1). The scripted agent wins an unhinted guessing game iff its target is 1 and
    always wins the easy game, so the step's mean win rate shows which seeds each env was played with."""
    seed = derive_seed(SEED, step, "train")
    guess = [np.mean([random.Random(s).randint(1, 9) == 1 for s in episode_seeds(seed, i, G)]) for i in (0, 2)]
    return float(np.mean([guess[0], 1.0, guess[1]]))


def test_two_process_cotraining_resumes_after_sigkill(tiny_model_dir, tmp_path, launch):
    pytest.importorskip("reasoning_gym")
    out = tmp_path / "runs"
    paths = {}
    for name in ("straight", "killed"):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(_config(tiny_model_dir, out, name)))
    straight, killed = launch(paths["straight"]), launch(paths["killed"])
    killed_dir = out / "killed"
    deadline = time.monotonic() + WAIT_S
    while not (killed_dir / "rounds" / "round_000").is_dir():  # kill while step 1 is under way
        assert killed.poll() is None, killed.stderr.read()[-4000:]
        assert time.monotonic() < deadline, "round 0 was not committed in time"
        time.sleep(0.1)
    kill_tree(killed.pid)
    killed.wait()
    assert straight.wait(timeout=WAIT_S) == 0, straight.stderr.read()[-4000:]
    resumed = launch(paths["killed"], resume=killed_dir)
    assert resumed.wait(timeout=WAIT_S) == 0, resumed.stderr.read()[-4000:]

    a, b = out / "straight", killed_dir
    kinds = ("spade_step", "round_committed", "eval")
    assert _events(b, *kinds) == _events(a, *kinds)
    steps = _events(a, "spade_step")
    assert [s["round"] for s in steps] == list(range(ROUNDS))
    # the sharded plays used each environment's seeds in the whole play set
    for step in steps[1:]:
        assert step["spade/episodes"] == 3 * 2 * G
        assert step["spade/win_rate"] == pytest.approx(_expected_win_rate(step["round"]))
    # both roles in one update: designs of step 1 train at step 2 (delay 1)
    assert steps[2]["spade/designer_rows"] == 4 and steps[2]["spade/agent_rows"] == 3 * G
    # both ranks identical after every step, and the resumed run trained the same weights
    digests = {run: {e["round"]: e["digests"] for e in _events(run, "rank_weight_digests")} for run in (a, b)}
    assert sorted(digests[a]) == list(range(ROUNDS))
    assert all(len(d) == 2 and d[0] == d[1] for d in digests[a].values())
    assert digests[b] == digests[a]


def _design_config(tiny_model_dir: Path, out: Path) -> dict:
    config = _config(tiny_model_dir, out, "designs")
    config["trainer"]["name"] = "selfplay_scripted_designs"
    config["engineer"] = {"name": "spade", "setting": "games", "skills": list(DESIGN_BY_SKILL),
                          "designs_per_round": 4, "corpus": "none", "diversity": {"embedding": "tfidf"},
                          "sandbox": {"workers": 1}}
    config["rounds"] = 2
    return config


def test_two_process_design_calls_are_sharded(tiny_model_dir, tmp_path, launch):
    """The spade engineer under two processes: rank r generates and admits calls r, r+2, ... in its
    own sandbox pool; the main process remembers all of them in call order."""
    pytest.importorskip("reasoning_gym")
    from curriculum.core.pool import program_hash
    from engineers.spade.memory import Memory
    from engineers.spade.parse import parse_design

    out = tmp_path / "runs"
    path = tmp_path / "designs.json"
    path.write_text(json.dumps(_design_config(tiny_model_dir, out)))
    proc = launch(path)
    assert proc.wait(timeout=WAIT_S) == 0, proc.stderr.read()[-4000:]
    run_dir = out / "designs"
    summary = json.loads((run_dir / "spade_rounds.jsonl").read_text().splitlines()[0])
    expected = [program_hash(parse_design((FIXTURES / DESIGN_BY_SKILL[s]).read_text()).program)
                for s in ("s0", "s2", "s3")]
    assert summary["designs"] == 4 and summary["admitted"] == expected
    assert summary["rejections"] == {"syntax_error": 1}
    memory = Memory.in_run_dir(run_dir)
    try:
        entries = sorted(memory.entries(), key=lambda e: e.extra["call"])
    finally:
        memory.close()
    assert [(e.skill, e.extra["rank"]) for e in entries] == [("s0", 0), ("s1", 1), ("s2", 0), ("s3", 1)]
    # the next step trained on the pool the main process built, and played every admitted design
    steps = _events(run_dir, "spade_step")
    assert steps[1]["spade/designs"] == 4 and steps[1]["spade/new_envs"] == 3
    assert steps[1]["spade/episodes"] == 3 * 2 * G


def test_two_process_frozen_pool_is_designed_once_before_round0(tiny_model_dir, tmp_path, launch):
    """``engineer.frozen_pool`` under two processes: both ranks take part in the design calls of
    the pool (calls sharded as in every design), both train round 0 on the main process's pool,
    and no design call follows."""
    pytest.importorskip("reasoning_gym")
    from curriculum.core.pool import program_hash
    from testbeds.spade.saved_pool import load_pool
    from engineers.spade.memory import Memory
    from engineers.spade.parse import parse_design

    out = tmp_path / "runs"
    config = _design_config(tiny_model_dir, out)
    config["engineer"]["frozen_pool"] = {"size": 3, "max_calls": 8, "batch": 4}
    config["trainer"]["pool"] = {"envs_per_step": 3, "max_plays": 10}
    path = tmp_path / "frozen.json"
    path.write_text(json.dumps(config))
    proc = launch(path)
    assert proc.wait(timeout=WAIT_S) == 0, proc.stderr.read()[-4000:]
    run_dir = out / "designs"
    expected = [program_hash(parse_design((FIXTURES / DESIGN_BY_SKILL[s]).read_text()).program)
                for s in ("s0", "s2", "s3")]
    assert [e.hash for e in load_pool(run_dir)] == expected
    assert len((run_dir / "spade_rounds.jsonl").read_text().splitlines()) == 1
    memory = Memory.in_run_dir(run_dir)
    try:
        entries = sorted(memory.entries(), key=lambda e: e.extra["call"])
    finally:
        memory.close()
    assert [(e.skill, e.extra["rank"]) for e in entries] == [("s0", 0), ("s1", 1), ("s2", 0), ("s3", 1)]
    steps = _events(run_dir, "spade_step")
    assert [s["round"] for s in steps] == [0, 1]
    assert all(s["spade/designs"] == 0 and s["spade/episodes"] == 3 * 2 * G for s in steps)
    digests = {e["round"]: e["digests"] for e in _events(run_dir, "rank_weight_digests")}
    assert all(len(d) == 2 and d[0] == d[1] for d in digests.values())
