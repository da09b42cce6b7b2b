"""``curriculum compare`` and ``curriculum report`` on the simulated learner."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.compare import SIMULATED_NOTICE, CompareSpec, compare, run_configs
from curriculum.config import ConfigError
from curriculum.report import DPI, FIGSIZE, report_run

REPO = Path(__file__).resolve().parents[2]
PIXELS = (int(FIGSIZE[0] * DPI), int(FIGSIZE[1] * DPI))
FAST = ["testbed.eval_agents=[3]", "testbed.eval_instances_per_size=6", "tasks_per_round=32"]


def _spec(out, engineers, seeds=2, rounds=3, jobs=1, overrides=()):
    return CompareSpec(engineers=engineers, testbed="mapf_frozenlake", seeds=seeds, rounds=rounds, out=out,
                       trainer="simulated", overrides=[*FAST, *overrides], jobs=jobs)


def assert_real_png(path: Path) -> None:
    assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as img:
        assert img.size == PIXELS
        pixels = np.asarray(img.convert("L"), dtype=float)
    # not blank: many distinct grey levels and a good share of non-background pixels
    assert len(np.unique(pixels)) > 20
    assert (pixels < 250).mean() > 0.05


def _scores(data):
    return {(r["engineer"], r["seed"]): r["scores"] for r in data["runs"]}


def test_compare_writes_table_json_and_plots(tmp_path):
    result = compare(_spec(tmp_path, ["random", "fixed", "optuna"], jobs=2))
    assert not result.failed
    data = json.loads((tmp_path / "compare.json").read_text())
    assert data["simulated"] is True and data["notice"] == SIMULATED_NOTICE
    assert result.table_text.startswith("SIMULATED LEARNER, not model results")
    assert (tmp_path / "table.txt").read_text() == result.table_text
    assert {r["status"] for r in data["runs"]} == {"new"} and len(data["runs"]) == 6
    for e in ("random", "fixed", "optuna"):
        s = data["summary"][e]
        assert s["n"] == 2 and len(s["per_round"]) == 3
        assert s["final_score"]["low"] <= s["final_score"]["mean"] <= s["final_score"]["high"]
        assert set(s["final_valid_by_size"]) == {f"{n}x{n}" for n in range(3, 11)}
    pairs = {(p["a"], p["b"]): p for p in data["pairwise"]}
    assert set(pairs) == {("random", "fixed"), ("random", "optuna"), ("fixed", "optuna")}
    finals = {k: v[-1] for k, v in _scores(data).items()}
    assert pairs[("random", "fixed")]["mean_diff"] == pytest.approx(
        np.mean([finals[("random", s)] - finals[("fixed", s)] for s in (0, 1)]))
    # identical starting config, eval suite and per-seed data across engineers
    for s in (0, 1):
        first = {e: json.loads((tmp_path / "runs" / f"{e}-seed{s}" / "rounds" / "round_000" / "proposal.json")
                               .read_text()) for e in ("random", "fixed", "optuna")}
        assert first["random"] == first["fixed"] == first["optuna"]
    assert {p.name for p in result.plots} == {
        "score_per_round.png", "final_by_size.png", "training_distribution.png", "zero_spread_share.png"}
    for p in result.plots:
        assert_real_png(p)
    # a rerun reuses everything
    again = compare(_spec(tmp_path, ["random", "fixed", "optuna"], jobs=2))
    assert {o.status for o in again.outcomes} == {"reused"}
    assert _scores(again.data) == _scores(data)


def test_frontier_beats_random_on_the_simulated_learner(tmp_path):
    result = compare(_spec(tmp_path, ["frontier", "random"], seeds=5, rounds=6, jobs=2, overrides=[]))
    s = result.data["summary"]
    print("frontier", s["frontier"]["final_score"], "random", s["random"]["final_score"])
    assert s["frontier"]["final_score"]["mean"] > s["random"]["final_score"]["mean"]
    assert s["frontier"]["mean_score_over_rounds"] > s["random"]["mean_score_over_rounds"]


def test_same_seed_same_results(tmp_path):
    a = compare(_spec(tmp_path / "a", ["optuna", "frontier"], seeds=1, rounds=3))
    b = compare(_spec(tmp_path / "b", ["optuna", "frontier"], seeds=1, rounds=3))
    assert _scores(a.data) == _scores(b.data)
    assert [r["data_ratio"] for r in a.data["runs"]] == [r["data_ratio"] for r in b.data["runs"]]


def test_killed_compare_reruns_only_missing_runs(tmp_path):
    out = tmp_path / "killed"
    args = ["compare", "--engineers", "random", "--trainer", "simulated", "--seeds", "3", "--rounds", "3",
            "--out", str(out), "--jobs", "1"] + [x for f in FAST for x in ("--set", f)]
    code = "import sys; from curriculum.cli import app; app(sys.argv[1:])"
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = out / "runs" / "random-seed0" / "rounds"
    second = out / "runs" / "random-seed1" / "rounds"
    deadline = time.time() + 120
    while time.time() < deadline and not (second / "round_000").is_dir():
        assert proc.poll() is None, "compare died before it could be killed"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (first / "round_002").is_dir(), "the first run should have finished before the kill"
    stamp = (first / "round_002" / "eval.json").stat().st_mtime_ns
    result = compare(_spec(out, ["random"], seeds=3))
    status = {o.seed: o.status for o in result.outcomes}
    assert status[0] == "reused" and status[1] == "resumed" and status[2] == "new"
    assert (first / "round_002" / "eval.json").stat().st_mtime_ns == stamp
    clean = compare(_spec(tmp_path / "clean", ["random"], seeds=3))
    assert _scores(result.data) == _scores(clean.data)


def test_a_comparison_cut_short_reports_its_finished_runs_and_runs_nothing(tmp_path):
    full = compare(_spec(tmp_path, ["random", "fixed"], seeds=2))
    # a run without its weights still counts as finished (a copy kept without checkpoints)
    for checkpoint in (tmp_path / "runs").glob("*/rounds/*/checkpoint"):
        shutil.rmtree(checkpoint)
    shutil.rmtree(tmp_path / "runs" / "fixed-seed1" / "rounds" / "round_002")  # cut in its last round
    shutil.rmtree(tmp_path / "runs" / "random-seed1")                          # never started
    cut = compare(_spec(tmp_path, ["random", "fixed"], seeds=2), finished_only=True)
    status = {(o.engineer, o.seed): o.status for o in cut.outcomes}
    assert status == {("random", 0): "reused", ("fixed", 0): "reused",
                      ("random", 1): "unfinished", ("fixed", 1): "unfinished"}
    assert not (tmp_path / "runs" / "random-seed1").exists(), "--finished must run nothing"
    assert not (tmp_path / "runs" / "fixed-seed1" / "rounds" / "round_002").exists()
    rows = {(r["engineer"], r["seed"]): r for r in json.loads((tmp_path / "compare.json").read_text())["runs"]}
    assert rows[("random", 0)]["scores"] == _scores(full.data)[("random", 0)]
    assert rows[("fixed", 1)]["status"] == "unfinished" and not rows[("fixed", 1)]["complete"]
    assert rows[("random", 1)]["status"] == "unfinished" and "scores" not in rows[("random", 1)]
    assert [p["n"] for p in cut.data["pairwise"]] == [1]  # only seed 0 has both arms


def test_cli_compare_finished_without_runs_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(app, ["compare", "--engineers", "fixed", "--trainer", "simulated",
                                      "--out", str(tmp_path / "none"), "--finished"])
    assert result.exit_code != 0 and "--finished" in result.output and "does not exist" in result.output


def test_config_mismatch_and_unknown_engineer_are_errors(tmp_path):
    compare(_spec(tmp_path, ["fixed"], seeds=1, rounds=1))
    with pytest.raises(ConfigError, match="different config"):
        compare(_spec(tmp_path, ["fixed"], seeds=1, rounds=1, overrides=["tasks_per_round=16"]))
    with pytest.raises(Exception, match="unknown engineer"):
        run_configs(_spec(tmp_path, ["nope"]))


def test_run_saved_before_a_field_existed_is_reused(tmp_path):
    """A config field added after a run was saved takes its default on both sides: no mismatch.
    A field the schema no longer knows is still a mismatch."""
    import yaml

    compare(_spec(tmp_path, ["fixed"], seeds=1, rounds=1))
    path = tmp_path / "runs" / "fixed-seed0" / "config.yaml"
    data = yaml.safe_load(path.read_text())
    del data["keep_checkpoints"]  # as if the run predates the option
    path.write_text(yaml.safe_dump(data))
    assert compare(_spec(tmp_path, ["fixed"], seeds=1, rounds=1)).outcomes[0].status == "reused"
    data["engineer"]["retired_knob"] = 1
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="retired_knob"):
        compare(_spec(tmp_path, ["fixed"], seeds=1, rounds=1))


def test_per_engineer_overrides(tmp_path):
    configs = run_configs(_spec(tmp_path, ["optuna", "random"], seeds=1,
                                overrides=["engineers.optuna.sampler=random"]))
    assert configs[("optuna", 0)].engineer.sampler == "random"
    assert configs[("random", 0)].engineer.name == "random"
    assert configs[("optuna", 0)].tasks_per_round == configs[("random", 0)].tasks_per_round == 32
    with pytest.raises(ConfigError):
        run_configs(_spec(tmp_path, ["random"], overrides=["engineers.optuna.sampler=random"]))


def test_cli_compare_and_report(tmp_path):
    runner = CliRunner()
    for command in ("compare", "report"):
        help_text = runner.invoke(app, [command, "--help"]).output
        assert "Example: curriculum " + command in help_text
    res = runner.invoke(app, ["compare", "--engineers", "frontier", "--trainer", "simulated", "--seeds", "1",
                              "--rounds", "2", "--out", str(tmp_path)] + [x for f in FAST for x in ("--set", f)])
    assert res.exit_code == 0, res.output
    assert "SIMULATED LEARNER" in res.output and "compare.json" in res.output
    run_dir = tmp_path / "runs" / "frontier-seed0"
    res = runner.invoke(app, ["report", str(run_dir)])
    assert res.exit_code == 0, res.output
    paths = [Path(line) for line in res.output.split() if line.endswith(".png")]
    assert [p.name for p in paths] == ["eval_metrics.png", "training_distribution.png"]
    for p in paths:
        assert p.parent == run_dir / "plots"
        assert_real_png(p)
    assert report_run(run_dir) == paths
    res = runner.invoke(app, ["report", str(tmp_path / "missing")])
    assert res.exit_code != 0
    # A finished comparison re-renders from its compare.json alone (what docs/results/ commits).
    copy = tmp_path / "committed"
    copy.mkdir()
    (copy / "compare.json").write_text((tmp_path / "compare.json").read_text())
    res = runner.invoke(app, ["compare", "--report", str(copy)])
    assert res.exit_code == 0, res.output
    assert "frontier" in res.output and "SIMULATED LEARNER" in res.output
    assert res.output == (tmp_path / "table.txt").read_text()
    res = runner.invoke(app, ["compare", "--report", str(tmp_path / "missing")])
    assert res.exit_code != 0 and "no compare.json" in res.output
    # A later seed alone (another machine's share), then both gathered: the seed-0 run is reused.
    res = runner.invoke(app, ["compare", "--engineers", "frontier", "--trainer", "simulated", "--seeds", "1",
                              "--first-seed", "1", "--rounds", "2", "--out", str(tmp_path)]
                        + [x for f in FAST for x in ("--set", f)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "runs" / "frontier-seed1").is_dir() and "frontier seed 1" in res.output
    assert "seed 0" not in res.output
    res = runner.invoke(app, ["compare", "--engineers", "frontier", "--trainer", "simulated", "--seeds", "2",
                              "--rounds", "2", "--out", str(tmp_path)] + [x for f in FAST for x in ("--set", f)])
    assert res.exit_code == 0, res.output
    assert "reused frontier seed 0" in res.output and "reused frontier seed 1" in res.output


@pytest.mark.slow
def test_acceptance_command_runs_all_fifteen(tmp_path):
    # Its wall time (about a minute on 2 quiet cores) is printed, not asserted: speed targets
    # belong in benchmarks, and a loaded machine would fail a timed test.
    start = time.perf_counter()
    result = compare(CompareSpec(engineers=["random", "fixed", "optuna"], testbed="mapf_frozenlake", seeds=5,
                                 rounds=6, out=tmp_path, trainer="simulated", jobs=2))
    wall = time.perf_counter() - start
    print(f"compare wall time {wall:.1f}s")
    assert not result.failed and len(result.outcomes) == 15
    for p in result.plots:
        assert_real_png(p)


def test_runs_execute_seed_major_so_a_cut_comparison_covers_every_engineer(tmp_path):
    from curriculum.compare import execute

    configs = run_configs(_spec(tmp_path, ["random", "fixed"], seeds=2, rounds=1))
    assert list(configs) == [("random", 0), ("random", 1), ("fixed", 0), ("fixed", 1)]
    seen: list[tuple[str, int]] = []
    execute(configs, jobs=1, progress=lambda outcome: seen.append((outcome.engineer, outcome.seed)))
    assert seen == [("random", 0), ("fixed", 0), ("random", 1), ("fixed", 1)]


def test_parallel_workers_split_the_cores(monkeypatch):
    from trainers.grpo.trainer import default_threads

    monkeypatch.setenv("CURRICULUM_TORCH_THREADS", "1")
    assert default_threads() == 1
    monkeypatch.setenv("CURRICULUM_TORCH_THREADS", "")
    assert default_threads() == (os.cpu_count() or 1)


def test_results_table_shows_valid_and_optimal_only_where_measured():
    import io as _io

    from rich.console import Console

    from curriculum.compare import results_table

    final = {"mean": 0.5, "low": 0.4, "high": 0.6}
    row = {"n": 2, "final_score": final, "mean_score_over_rounds": 0.45}
    data = {"testbed": "mapf_frozenlake", "seeds": [0, 1], "rounds": 3, "simulated": False, "engineers": ["a", "b"],
            "pairwise": [], "summary": {"a": {**row, "final_valid_rate": float("nan"), "final_optimal_rate": float("nan")},
                                        "b": {"n": 0}}}

    def shown(d):
        console = Console(file=_io.StringIO(), width=200, color_system=None)
        console.print(results_table(d))
        return console.file.getvalue()

    text = shown(data)
    assert "0.500 [0.400, 0.600]" in text and "final valid" not in text and "nan" not in text
    data["summary"]["a"].update(final_valid_rate=0.25, final_optimal_rate=0.125)
    text = shown(data)
    assert "final valid" in text and "0.250" in text and "0.125" in text
    data["testbed"] = "reasoning_gym"  # its layout declares accuracy only: no valid or optimal column
    assert "final valid" not in shown(data)


def test_training_shares_read_any_bucket_space_from_the_proposal():
    from curriculum.report import training_shares

    rg = {"buckets": {"gcd:0": {"share": 0.75}, "gcd:1": {"share": 0.25}}}
    assert training_shares("reasoning_gym", rg) == {"gcd:0": 0.75, "gcd:1": 0.25}
    mapf = {"sizes": {"3x3": {"data_ratio": 0.4, "hole_ratio": 0.2, "wait_ratio": 0.0},
                      "4x4": {"data_ratio": 0.6, "hole_ratio": 0.2, "wait_ratio": 0.0}}}
    assert training_shares("mapf_frozenlake", mapf) == {"3x3": 0.4, "4x4": 0.6}
    assert training_shares("reasoning_gym", {"sizes": {}}) == {}


def test_distribution_plot_of_a_proposal_without_buckets(tmp_path):
    """SPADE's proposal (an environment pool) has no buckets: the plot says so instead of raising
    ('zero-size array', which made every SPADE run print 'could not write plots')."""
    from curriculum.report import plot_distribution

    path = plot_distribution({"spade": np.zeros((2, 0))}, [], tmp_path / "training_distribution.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_of_a_run_without_map_sizes_draws_no_empty_heatmap(tmp_path):
    """A SPADE run's eval has no per-size or per-level rates: the per-size panel says so instead
    of drawing an empty image (matplotlib warned about singular limits on every SPADE round)."""
    import warnings

    from curriculum.report import RunSummary, plot_run_metrics

    metrics = [{"score": 0.1 * r, "reasoning_gym/mean": 0.1 * r} for r in range(3)]
    summary = RunSummary(path=tmp_path / "spade-run", engineer="spade", seed=0, rounds_planned=3,
                         scores=[m["score"] for m in metrics], metrics=metrics, data_ratio=[{}] * 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = plot_run_metrics(summary, tmp_path / "eval_metrics.png")
    with Image.open(path) as img:  # half the figure is the note, so less ink than assert_real_png asks
        assert img.size == PIXELS and len(np.unique(np.asarray(img.convert("L")))) > 20


def test_one_seed_comparison_writes_strict_json_and_unbounded_intervals_as_dashes(tmp_path):
    """One seed leaves run-to-run variation unmeasured: its intervals are unbounded. compare.json
    holds them as null (strict JSON, which ``jq`` and JavaScript parse), the table as ``[—, —]``,
    and the file re-renders the same table."""
    from curriculum.compare import load_compare_data, table_text_of

    result = compare(_spec(tmp_path, ["random", "fixed"], seeds=1, rounds=2))
    assert not result.failed
    text = (tmp_path / "compare.json").read_text()

    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    data = json.loads(text, parse_constant=refuse)
    assert data["pairwise"][0]["ci95_low"] is None and data["pairwise"][0]["ci95_high"] is None
    assert "[—, —]" in result.table_text and "inf" not in result.table_text
    assert table_text_of(load_compare_data(tmp_path)) == result.table_text
