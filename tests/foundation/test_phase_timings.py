"""Every run records the seconds of its phases in ``metrics.jsonl`` (``curriculum.loop.PhaseTimer``):
the set-up, each eval before round 0, and per round sampling, training, evals, design and commit, so
that a finished run is a calibration point of ``--dry-run``'s estimate (``benchmarks/estimate_check.py``).
Structure only: no assertion on how long anything took."""

from __future__ import annotations

import json

from curriculum.config import load_config
from curriculum.loop import PhaseTimer, run
from curriculum.rundir import RunDir

PHASES = {"sample", "train", "eval", "commit", "round"}


def _records(run_dir) -> list[dict]:
    return [json.loads(line) for line in RunDir.open(run_dir).metrics_path.read_text().splitlines()]


def _simulated(tmp_path, *sets: str):
    return load_config(None, ["trainer.name=simulated", "testbed.eval_agents=[3]", "testbed.eval_instances_per_size=2",
                              "tasks_per_round=16", "rounds=3", f"output_dir={tmp_path}", "run_name=timed", *sets])


def test_each_round_records_its_phase_seconds(tmp_path):
    result = run(_simulated(tmp_path, "eval_before_training=true", "test_every_round=true"))
    records = _records(result.run_dir)
    committed = [r for r in records if r.get("event") == "round_committed"]
    assert [r["round"] for r in committed] == [0, 1, 2]
    for record in committed:
        seconds = record["seconds"]
        assert PHASES | {"test_eval"} <= set(seconds)
        assert ("design" in seconds) == (record["round"] < 2)  # no design after the last round
        assert all(isinstance(v, float) and v >= 0 for v in seconds.values())
        parts = sum(v for k, v in seconds.items() if k != "round")
        assert parts <= seconds["round"] + 0.01  # the phases lie inside the round
    setup = [r for r in records if r.get("event") == "setup"]
    assert len(setup) == 1 and setup[0]["round"] == -1 and setup[0]["seconds"] >= 0
    for event in ("baseline_eval", "baseline_test_eval"):
        (line,) = [r for r in records if r.get("event") == event]
        assert line["seconds"] >= 0


def test_a_round_without_a_test_suite_due_has_no_test_seconds(tmp_path):
    result = run(_simulated(tmp_path, "test_every_round=false"))
    committed = [r for r in _records(result.run_dir) if r.get("event") == "round_committed"]
    assert ["test_eval" in r["seconds"] for r in committed] == [False, False, True]  # the last round tests


def test_a_resumed_run_logs_its_own_setup(tmp_path):
    first = run(_simulated(tmp_path, "rounds=2"))
    run(_simulated(tmp_path, "rounds=3"), resume=first.run_dir)
    records = _records(first.run_dir)
    assert [r["round"] for r in records if r.get("event") == "setup"] == [-1, 1]
    assert [r["round"] for r in records if r.get("event") == "round_committed"] == [0, 1, 2]


def test_the_timer_adds_up_repeated_phases():
    timer = PhaseTimer()
    for _ in range(2):
        with timer("eval"):
            pass
    assert set(timer.seconds) == {"eval"} and timer.record()["round"] >= timer.seconds["eval"]
