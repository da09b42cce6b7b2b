"""``benchmarks/estimate_check.py``: what it reads of a run dir (phases from recorded seconds, or
from file times and TRL's training seconds), and how it sets the estimate beside them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks.estimate_check import compare, main, measure, round_rows
from curriculum.config import dump_config, load_config
from curriculum.walltime import PHASES, Budget, Estimate, Work

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000.0


def _touch(path: Path, at: float, text: str = "{}") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (at, at))


def _metrics(path: Path, records: list[dict]) -> None:
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"cut short\n')


def _old_run_dir(tmp_path: Path, lock_at: float = T0) -> Path:
    """A finished two-round run as this code wrote it before recording phases: file times only."""
    run = tmp_path / "old"
    run.mkdir()
    (run / "config.yaml").write_text(dump_config(load_config(ROOT / "configs/mapf_cpu_demo.yaml", ["rounds=2"])))
    _touch(run / ".lock", lock_at, "1")
    for name, offset in (("baseline_eval", 30), ("baseline_test_eval", 55), ("warmstart", 58),
                         ("warmstart_eval", 85), ("warmstart_test_eval", 110)):
        _touch(run / f"{name}.json", T0 + offset)
    _touch(run / "rounds/round_000/eval.json", T0 + 190)
    _touch(run / "rounds/round_001/eval.json", T0 + 270)
    _metrics(run, [{"round": -1, "event": "baseline_eval", "cached": False},
                   {"round": -1, "event": "baseline_test_eval", "cached": True},
                   {"round": -1, "event": "warmstart", "warmstart/seconds": 365.0, "warmstart/cached": 1.0},
                   {"round": 0, "step": 1, "step_time": 25.0},
                   {"round": 0, "event": "round_committed", "score": 0.1, "train/seconds": 50.0},
                   {"round": 1, "event": "round_committed", "score": 0.2, "train/seconds": 52.0}])
    return run


def test_phases_from_file_times(tmp_path):
    measured = measure(_old_run_dir(tmp_path))
    assert measured.source == "file times" and measured.rounds == 2
    assert measured.phases == pytest.approx({"setup+baseline_eval": 30, "baseline_test_eval": 25, "warmstart": 3,
                                             "warmstart_eval": 27, "warmstart_test_eval": 25, "train": 102,
                                             "rest": (190 - 110 - 50) + (270 - 190 - 52)})
    assert measured.total == pytest.approx(270)
    assert measured.cached == {"baseline_test_eval", "warmstart"}
    assert measured.per_round == [(50.0, pytest.approx(80.0)), (52.0, pytest.approx(80.0))]


def test_a_resumed_run_has_no_total(tmp_path):
    measured = measure(_old_run_dir(tmp_path, lock_at=T0 + 200))  # the lock rewritten by a resume in round 1
    assert measured.total is None and measured.rounds == 2
    assert "setup+baseline_eval" not in measured.phases and measured.phases["train"] == 102
    assert any("resumed" in note for note in measured.notes)


def test_phases_from_recorded_seconds(tmp_path):
    run = tmp_path / "new"
    _touch(run / "rounds/round_000/eval.json", T0)
    _touch(run / "rounds/round_001/eval.json", T0)
    rounds = [{"sample": 0.5, "train": 50.0, "eval": 26.0, "design": 0.2, "commit": 1.3, "round": 78.5},
              {"sample": 0.5, "train": 52.0, "eval": 25.0, "test_eval": 27.0, "commit": 1.5, "round": 106.5}]
    _metrics(run, [{"round": -1, "event": "setup", "seconds": 4.5},
                   {"round": -1, "event": "baseline_eval", "cached": False, "seconds": 28.0},
                   {"round": -1, "event": "warmstart", "warmstart/cached": 0.0, "seconds": 300.0},
                   *({"round": i, "event": "round_committed", "score": 0.1, "seconds": s} for i, s in enumerate(rounds))])
    measured = measure(run)
    assert measured.source == "recorded" and not measured.cached
    assert measured.phases == pytest.approx({"setup": 4.5, "baseline_eval": 28.0, "warmstart": 300.0, "train": 102.0,
                                             "eval": 51.0, "test_eval": 27.0, "design": 0.2,
                                             "overhead": (78.5 - 76.2) + (106.5 - 104.0)})
    assert measured.total == pytest.approx(4.5 + 28 + 300 + 78.5 + 106.5)
    assert measured.per_round == [(50.0, 78.5), (52.0, 106.5)]


def _estimate(trained_warmstart: bool = True) -> Estimate:
    phases = dict.fromkeys(PHASES, 0.0) | {"setup": 5.0, "baseline_eval": 30.0, "baseline_test_eval": 30.0,
                                           "warmstart_eval": 29.0, "warmstart_test_eval": 29.0, "train": 100.0,
                                           "eval": 58.0, "overhead": 8.0, "final_test": 29.0}
    budget = Budget(warmstart=Work(trained=1_000) if trained_warmstart else Work())
    return Estimate(83.0, sum(phases.values()), 300.0, budget, "note", phases)


def test_what_the_run_took_from_a_cache_is_estimated_at_zero(tmp_path):
    rows = {p: (e, m) for p, e, m in compare(measure(_old_run_dir(tmp_path)), _estimate())}
    assert rows["setup+baseline_eval"] == (35.0, pytest.approx(30))  # set-up and the first eval: one span
    assert rows["baseline_test_eval"][0] == 0.0  # reused from the eval cache
    assert rows["warmstart"][0] == 0.0  # loaded from the warm-start cache
    assert rows["rest"][0] == pytest.approx(58 + 8 + 29)  # evals, overhead and the last test
    assert rows["total"][0] == pytest.approx(35 + 29 + 29 + 100 + 95)
    assert rows["total"][1] == pytest.approx(270)


def test_recorded_phases_set_the_last_test_into_test_eval(tmp_path):
    run = tmp_path / "new"
    _touch(run / "rounds/round_000/eval.json", T0)
    _metrics(run, [{"round": -1, "event": "setup", "seconds": 4.5},
                   {"round": -1, "event": "warmstart", "warmstart/cached": 0.0, "seconds": 310.0},
                   {"round": 0, "event": "round_committed", "score": 0.1,
                    "seconds": {"train": 50.0, "eval": 26.0, "test_eval": 27.0, "round": 105.0}}])
    rows = {p: (e, m) for p, e, m in compare(measure(run), _estimate())}
    assert rows["test_eval"] == (29.0, 27.0) and "final_test" not in rows
    assert rows["warmstart"] == (300.0, 310.0)  # trained by this run: its estimate counts
    assert rows["setup"] == (5.0, 4.5)
    assert round_rows(measure(run), _estimate())[0] == (100.0, 50.0, pytest.approx(166.0 + 29.0), 105.0)


def test_the_script_prints_a_table_for_a_run_dir(tmp_path, capsys):
    assert main([str(_old_run_dir(tmp_path)), "--json", str(tmp_path / "out.json")]) == 0
    out = capsys.readouterr().out
    assert "setup+baseline_eval" in out and "total" in out and "round 1: train" in out
    (table,) = json.loads((tmp_path / "out.json").read_text())
    assert table["rows"][-1]["phase"] == "total" and table["rows"][-1]["measured_s"] == pytest.approx(270)


def test_a_run_of_this_code_is_read_from_its_recorded_seconds(tmp_path, capsys):
    from curriculum.loop import run

    config = load_config(None, ["trainer.name=simulated", "testbed.eval_agents=[3]", "testbed.eval_instances_per_size=2",
                                "tasks_per_round=16", "rounds=2", "eval_before_training=true",
                                f"output_dir={tmp_path}", "run_name=timed"])
    result = run(config)
    measured = measure(result.run_dir)
    assert measured.source == "recorded" and measured.rounds == 2 and len(measured.per_round) == 2
    assert {"setup", "baseline_eval", "train", "eval", "overhead"} <= set(measured.phases)
    assert measured.total is not None and measured.total >= measured.phases["train"]
    assert main([str(result.run_dir)]) == 0
    assert "measured from recorded" in capsys.readouterr().out
