"""Declared comparison designs: arms, primary pairs, power checks, pooled analysis, --dry-run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from scipy.stats import t as student_t
from typer.testing import CliRunner

from curriculum.cli import app
from curriculum.compare import (CompareSpec, compare, design_summary, design_text, load_design, pilot_variance,
                                power_problems, reanalyse, round0_problems, run_configs, within)
from curriculum.config import ConfigError
from curriculum.stats import seed_sign_flip_test

REPO = Path(__file__).resolve().parents[2]
POWERED = REPO / "configs/compare/mapf_cpu_powered.yaml"
FAST = ["testbed.eval_agents=[3]", "testbed.eval_instances_per_size=6", "tasks_per_round=32"]


def _design(tmp_path, **changes):
    data = {"arms": {"a": {"engineer": "random"}, "b": {"engineer": "fixed"},
                     "c": {"engineer": "fixed", "set": ["testbed.eval_hole_ratio=0.1"]}},
            "primary": [["a", "b"]], "primary_seeds": 2, "secondary_seeds": 1, "round0": "own",
            "thresholds": {"min_primary_seeds": 2, "min_secondary_seeds": 1, "min_test_tasks": 1}}
    data.update(changes)
    path = tmp_path / "design.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_design(path)


def _spec(tmp_path, design, arms=None, rounds=2):
    return CompareSpec(engineers=arms or list(design.arms), testbed="mapf_frozenlake", rounds=rounds,
                       out=tmp_path / "out", trainer="simulated", overrides=FAST, design=design)


def test_arms_get_their_engineer_overrides_and_seeds(tmp_path):
    design = _design(tmp_path)
    configs = run_configs(_spec(tmp_path, design))
    assert sorted(configs) == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("c", 0)]
    assert configs[("c", 0)].engineer.name == "fixed" and configs[("c", 0)].testbed.eval_hole_ratio == 0.1
    assert configs[("b", 0)].testbed.eval_hole_ratio == 0.2
    assert configs[("a", 1)].run_name == "a-seed1"


def test_a_design_declares_its_first_seed_and_the_command_line_shifts_it(tmp_path):
    design = _design(tmp_path, first_seed=20)
    assert sorted(run_configs(_spec(tmp_path, design))) == [("a", 20), ("a", 21), ("b", 20), ("b", 21), ("c", 20)]
    shifted = CompareSpec(engineers=list(design.arms), testbed="mapf_frozenlake", rounds=2, out=tmp_path / "out",
                          trainer="simulated", overrides=FAST, design=design, first_seed=5)
    assert sorted(run_configs(shifted))[0] == ("a", 5)
    assert run_configs(_spec(tmp_path, design))[("b", 21)].seed == 21
    with pytest.raises(ConfigError, match="first_seed"):
        _design(tmp_path, first_seed=-1)


def test_seeds_on_the_command_line_cannot_silently_lose_to_a_design(tmp_path):
    path = tmp_path / "design.yaml"
    path.write_text(yaml.safe_dump({"arms": {"a": {"engineer": "random"}, "b": {"engineer": "fixed"}},
                                    "primary": [["a", "b"]], "primary_seeds": 2, "first_seed": 7}))
    runner = CliRunner()
    res = runner.invoke(app, ["compare", "--design", str(path), "--trainer", "simulated", "--seeds", "4",
                              "--dry-run", "--out", str(tmp_path / "x")])
    assert res.exit_code != 0 and "a design declares the seeds of each arm" in " ".join(res.output.split())
    res = runner.invoke(app, ["compare", "--design", str(path), "--trainer", "simulated", "--testbed",
                              "mapf_frozenlake", "--dry-run", "--out", str(tmp_path / "x")])
    assert res.exit_code == 0, res.output
    assert "a-seed{7,8}" in res.output and "b-seed{7,8}" in res.output


def test_bad_designs_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="not among the arms"):
        _design(tmp_path, primary=[["a", "zzz"]])
    with pytest.raises(ConfigError, match="itself"):
        _design(tmp_path, primary=[["a", "a"]])
    with pytest.raises(ConfigError, match="names engineer 'nope'"):
        _design(tmp_path, arms={"a": {"engineer": "nope"}, "b": {"engineer": "fixed"}})
    with pytest.raises(ConfigError, match="not arms of the design"):
        run_configs(_spec(tmp_path, _design(tmp_path), arms=["a", "zzz"]))


def test_a_gain_only_design_states_its_empty_family(tmp_path):
    """``primary: []`` asks only each arm's gain over its start; omitting ``primary`` is refused."""
    design = _design(tmp_path, primary=[], arms={"a": {"engineer": "fixed", "seeds": 2}})
    spec = _spec(tmp_path, design)
    summary = design_summary(spec, run_configs(spec), pilot_variance([]))
    text = design_text(summary)
    assert "no primary pair: the design asks what each arm's training adds over its start" in text
    assert "minimal detectable effect" not in text
    path = tmp_path / "omitted.yaml"
    path.write_text(yaml.safe_dump({"arms": {"a": {"engineer": "fixed"}}}))
    with pytest.raises(ConfigError, match="primary"):
        load_design(path)


def test_underpowered_designs_warn_or_refuse(tmp_path):
    design = _design(tmp_path, thresholds={"min_primary_seeds": 6, "min_test_tasks": 144,
                                           "min_secondary_seeds": 3})
    spec = _spec(tmp_path, design)
    problems = power_problems(spec, run_configs(spec))
    assert any("arm a: 2 seeds, below the 6 a primary arm needs" in p for p in problems)
    assert any("arm c: 1 seeds, below the 3 a secondary arm needs" in p for p in problems)
    assert any("below 144" in p for p in problems)
    refusing = _design(tmp_path, thresholds={"min_primary_seeds": 6, "on_underpowered": "refuse"})
    with pytest.raises(ConfigError, match="under-powered"):
        compare(_spec(tmp_path, refusing))
    assert not (tmp_path / "out" / "runs").exists()  # refused before anything ran


def test_the_shipped_powered_design_meets_its_thresholds():
    design = load_design(POWERED)
    assert [tuple(p) for p in design.primary] == [("checkpoint", "fixed"), ("frontier", "fixed_test")]
    spec = CompareSpec(engineers=list(design.arms), trainer="grpo", design=design)
    configs = run_configs(spec)
    assert power_problems(spec, configs) == []
    assert round0_problems(spec, configs) == []
    assert {design.seeds_of(a) for a in ("checkpoint", "fixed", "frontier", "fixed_test")} == {6}
    assert {design.seeds_of(a) for a in ("random", "optuna", "learnability", "plr", "rlve")} == {3}
    test_arm = configs[("fixed_test", 0)].testbed
    assert {s: p.data_ratio > 0 for s, p in test_arm.initial_proposal.sizes.items() if p.data_ratio > 0} \
        == {s: True for s in test_arm.eval_sizes}
    assert configs[("fixed", 0)].testbed.initial_proposal == "random"
    # Without the design, the same base config is flagged.
    bare = CompareSpec(engineers=["fixed", "random"], trainer="grpo", seeds=3)
    assert len(power_problems(bare, run_configs(bare))) >= 3


def test_runs_are_counted_as_scored_on_the_test_suite_size(tmp_path):
    # The test suite may be larger than the validation suite the engineers read; power is the test's.
    design = _design(tmp_path, set=["testbed.test_instances_per_size=24"],
                     thresholds={"min_primary_seeds": 2, "min_secondary_seeds": 1, "min_test_tasks": 100})
    spec = _spec(tmp_path, design)
    assert power_problems(spec, run_configs(spec)) == []  # 1 agent count x 8 sizes x 24 = 192
    small = _design(tmp_path, thresholds={"min_primary_seeds": 2, "min_secondary_seeds": 1, "min_test_tasks": 100})
    small_spec = _spec(tmp_path, small)  # the validation suite's 6 per size: 48
    assert "arm a: scored on 48 tasks per run, below 100" in power_problems(small_spec, run_configs(small_spec))


def test_dry_run_prints_the_mde_and_its_variance_source(tmp_path):
    out = CliRunner().invoke(app, ["compare", "--design", str(POWERED), "--trainer", "grpo", "--dry-run",
                                   "--out", str(tmp_path / "x")])
    assert out.exit_code == 0, out.output
    # Two primary pairs: t quantiles with 5 df at alpha 0.05 / 2, the binomial default's variance.
    mde = (student_t.ppf(1 - 0.025 / 2, 5) + student_t.ppf(0.8, 5)) * (0.5 / 144 / 6) ** 0.5
    assert f"checkpoint - fixed: MDE = {mde:.4f}" in out.output
    assert "no pilot: the stated default" in out.output
    assert "power thresholds: all met" in out.output
    assert not (tmp_path / "x").exists()


def test_primary_analysis_at_the_level_of_seeds_and_pilot(tmp_path):
    design = _design(tmp_path)
    result = compare(_spec(tmp_path, design))
    assert not result.failed
    data = json.loads((tmp_path / "out" / "compare.json").read_text())
    rows = {(r["engineer"], r["seed"]): r for r in data["runs"]}
    for row in rows.values():  # paths relative to the compare dir, so it can be moved or committed
        assert not Path(row["run_dir"]).is_absolute() and (tmp_path / "out" / row["run_dir"] / "config.yaml").is_file()
    assert data["plots"] and all((tmp_path / "out" / p).is_file() for p in data["plots"])
    # What a curriculum is for: the share of GRPO groups without reward spread, per run and round.
    assert all(len(r["zero_spread_share"]) == 2 and all(0 <= x <= 1 for x in r["zero_spread_share"])
               for r in data["runs"])
    assert any(p.endswith("zero_spread_share.png") for p in data["plots"])
    assert "groups without spread" in result.table_text
    assert len(rows[("a", 0)]["task_scores"]) == 48  # every eval task (1 agent count x 8 sizes x 6), by id
    (primary,) = data["primary"]
    assert (primary["a"], primary["b"], primary["seeds"], primary["tasks"]) == ("a", "b", 2, 96)
    seed_means = [sum(rows[("a", s)]["task_scores"][t] - rows[("b", s)]["task_scores"][t]
                      for t in rows[("a", s)]["task_scores"]) / 48 for s in (0, 1)]
    assert primary["seed_means"] == pytest.approx({"0": seed_means[0], "1": seed_means[1]})
    # Two seeds: the exact sign-flip test over seeds gives 1 (or 0.5 when one mean is 0).
    assert primary["p_value"] == seed_sign_flip_test(seed_means) and primary["p_value"] >= 0.5
    assert primary["p_holm"] == primary["p_value"] and primary["family"] == 1
    assert data["round0"] == "own"
    d = primary["difference"]
    assert d["low"] <= d["mean"] <= d["high"]
    diffs = [rows[("a", s)]["task_scores"][t] - rows[("b", s)]["task_scores"][t]
             for s in (0, 1) for t in rows[("a", s)]["task_scores"]]
    assert d["mean"] == pytest.approx(sum(diffs) / len(diffs))
    assert "Primary comparison: a − b" in result.table_text
    # The finished comparison is a pilot: its paired variance sizes the next design's MDE.
    pilot = pilot_variance([tmp_path / "out"])
    assert pilot.source.startswith("pilot ") and pilot.components.within_seed >= 0
    summary = design_summary(_spec(tmp_path, design), run_configs(_spec(tmp_path, design)), pilot)
    assert summary["pairs"][0]["tasks"] == 48


def test_each_arm_gets_its_gain_over_its_starting_model(tmp_path):
    design = _design(tmp_path)  # the simulated config evaluates the starting model
    result = compare(_spec(tmp_path, design))
    data = json.loads((tmp_path / "out" / "compare.json").read_text())
    gains = {r["arm"]: r for r in data["gain"]}
    assert set(gains) == {"a", "b", "c"}
    gain = gains["a"]
    assert (gain["start"], gain["seeds"], gain["tasks"]) == ("baseline", 2, 96)
    out = tmp_path / "out"
    expected = []
    for row in (r for r in data["runs"] if r["engineer"] == "a"):
        start = json.loads((out / row["run_dir"] / "baseline_test_eval.json").read_text())["task_scores"]
        expected += [row["task_scores"][t] - start[t] for t in row["task_scores"]]
    assert gain["difference"]["mean"] == pytest.approx(sum(expected) / len(expected))
    assert gain["rose"] == sum(x > 0 for x in expected) and gain["fell"] == sum(x < 0 for x in expected)
    assert "What training added" in result.table_text
    # Without a start eval there is nothing to measure from, and the table says nothing about it.
    bare = compare(_spec(tmp_path / "bare", _design(tmp_path, set=["eval_before_training=false"])))
    assert all("reason" in r for r in bare.data["gain"]) and "What training added" not in bare.table_text


def test_compare_json_names_the_design_config_as_the_command_line_does(tmp_path, monkeypatch):
    # A committed compare.json must not carry the machine's absolute checkout path.
    monkeypatch.chdir(tmp_path)
    data = {"runs": [], "design": {"config": str(tmp_path / "configs" / "base.yaml")}}
    within(tmp_path / "out", data)
    assert data["design"]["config"] == "configs/base.yaml"
    outside = {"runs": [], "design": {"config": "/elsewhere/base.yaml"}}
    within(tmp_path / "out", outside)
    assert outside["design"]["config"] == "/elsewhere/base.yaml"


def test_cli_runs_a_design_and_warns_when_underpowered(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["compare", "--trainer", "simulated", "--out", str(tmp_path / "x")])
    assert res.exit_code != 0 and "--engineers is required without --design" in res.output
    path = tmp_path / "design.yaml"
    path.write_text(yaml.safe_dump({"arms": {"a": {"engineer": "random"}, "b": {"engineer": "fixed"}},
                                    "primary": [["a", "b"]], "primary_seeds": 2}))
    res = runner.invoke(app, ["compare", "--design", str(path), "--trainer", "simulated", "--rounds", "2",
                              "--testbed", "mapf_frozenlake", "--out", str(tmp_path / "out")]
                        + [x for f in FAST for x in ("--set", f)])
    assert res.exit_code == 0, res.output
    assert "under-powered: arm a: 2 seeds, below the 6 a primary arm needs" in " ".join(res.output.split())
    assert "Primary comparison: a − b" in res.output
    res = runner.invoke(app, ["compare", "--design", str(path), "--trainer", "simulated", "--out",
                              str(tmp_path / "out"), "--pilot", str(tmp_path / "out")])
    assert res.exit_code != 0 and "--pilot sizes the MDE of --dry-run only" in res.output


TRAINER_OF = {"mapf_cpu_powered.yaml": "grpo", "mapf_cpu_demo_control.yaml": "grpo",
              "mapf_cpu_demo_powered.yaml": "grpo",
              "mapf_small_powered.yaml": "small", "mapf_small_checkpoint.yaml": "small",
              "mapf_small_ranking.yaml": "small", "mapf_small_hard_target.yaml": "small",
              "mapf_small_hard_target_holes.yaml": "small", "mapf_small_hard_target_holes_dynamic.yaml": "small", "mapf_cpu_learns.yaml": "grpo",
              "mapf_cpu_hard_target.yaml": "grpo",
              "spade_cpu.yaml": "selfplay"}


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "configs/compare").glob("*.yaml")))
def test_every_shipped_design_resolves_and_meets_its_own_thresholds(name):
    assert name in TRAINER_OF, f"configs/compare/{name}: say which trainer it is for in TRAINER_OF"
    design = load_design(REPO / "configs/compare" / name)
    spec = CompareSpec(engineers=list(design.arms), trainer=TRAINER_OF[name], design=design)
    configs = run_configs(spec)
    assert power_problems(spec, configs) == []
    assert round0_problems(spec, configs) == []
    assert {arm for arm, _ in configs} == set(design.arms)


def test_the_demo_control_trains_on_the_test_distribution_and_shares_round0():
    design = load_design(REPO / "configs/compare/mapf_cpu_demo_control.yaml")
    configs = run_configs(CompareSpec(engineers=list(design.arms), trainer="grpo", design=design))
    demo, control = configs[("frontier", 0)], configs[("fixed", 0)]
    assert control.engineer.name == "fixed" and demo.engineer.name == "frontier"
    # Only the engineer differs, so both runs start from one round 0; its config is the test distribution.
    assert demo.model_dump(exclude={"engineer", "run_name"}) == control.model_dump(exclude={"engineer", "run_name"})
    trained = {s for s, p in control.testbed.initial_proposal.sizes.items() if p.data_ratio > 0}
    assert trained == set(control.testbed.eval_sizes)


def test_one_round0_rule_shared_or_own(tmp_path):
    """A shared round 0 is refused when one arm's round 0 would differ; ``own`` runs every round 0."""
    mixed = _design(tmp_path, round0="shared")  # arm c evaluates on other maps from round 0 on
    spec = _spec(tmp_path, mixed)
    assert any("arm c: its round 0 differs from arm a's" in p for p in round0_problems(spec, run_configs(spec)))
    with pytest.raises(ConfigError, match="round 0 cannot be shared"):
        compare(spec)
    alike = _design(tmp_path, round0="shared", arms={"a": {"engineer": "random"}, "b": {"engineer": "fixed"}})
    result = compare(_spec(tmp_path / "alike", alike))
    assert result.data["round0"] == "shared"
    assert all(r.get("round0_from") for r in result.data["runs"])
    summary = design_summary(_spec(tmp_path, alike), run_configs(_spec(tmp_path, alike)), pilot_variance([]))
    assert "round 0: shared" in design_text(summary)


def test_reanalyse_recomputes_every_statistic_from_compare_json_alone(tmp_path):
    result = compare(_spec(tmp_path, _design(tmp_path)))
    out = tmp_path / "out"
    stale = json.loads((out / "compare.json").read_text())
    stale["primary"][0]["p_value"] = 0.0001  # what an older analysis might have written
    del stale["gain"]
    (out / "compare.json").write_text(json.dumps(stale))
    (out / "table.txt").write_text("old")
    data = reanalyse(out)
    for key in ("primary", "gain", "pairwise", "round0"):
        assert data[key] == result.data[key], key
    assert json.loads((out / "compare.json").read_text())["primary"] == result.data["primary"]
    assert (out / "table.txt").read_text() == result.table_text
    res = CliRunner().invoke(app, ["compare", "--reanalyse"])
    assert res.exit_code != 0 and "--report DIR" in res.output


def test_dry_run_names_the_seeds_a_target_mde_needs_with_a_pilot():
    design = load_design(REPO / "configs/compare/mapf_small_ranking.yaml").model_copy(update={"target_mde": 0.03})
    spec = CompareSpec(engineers=list(design.arms), trainer="small", design=design)
    pilot = pilot_variance([REPO / "docs/results/small_ranking_all"])
    summary = design_summary(spec, run_configs(spec), pilot)
    (first, *_) = summary["pairs"]
    assert summary["family"] == 8 and first["mde"] > 0.03
    assert first["seeds_for_target"] > 10
    assert f"{first['seeds_for_target']} seeds reach the target MDE 0.03" in design_text(summary)
    # Without a measured pilot the default variance is an assumption: no seed count is promised.
    assert "seeds_for_target" not in design_summary(spec, run_configs(spec), pilot_variance([]))["pairs"][0]
