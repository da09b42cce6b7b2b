"""The optuna engineer: simplex parametrisations, one trial per round in SQLite, idempotent resume."""

from __future__ import annotations

import shutil

import optuna
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curriculum.config import load_config
from curriculum.loop import run
from curriculum.rundir import RunDir
from engineers.optuna_engineer import (SearchSpace, objective_value, simplex_to_sticks, simplex_to_weights,
                                       sticks_to_simplex, weights_to_simplex)
from testbeds.mapf_frozenlake.config import SPACE, GeneratorConfig, random_config

import numpy as np

unit = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(st.lists(unit, min_size=7, max_size=7), st.lists(unit, min_size=8, max_size=8))
def test_both_parametrisations_always_give_a_simplex(sticks, weights):
    for ratios in (sticks_to_simplex(sticks), weights_to_simplex(weights)):
        assert len(ratios) == 8 and all(r >= 0 for r in ratios)
        assert sum(ratios) == pytest.approx(1.0, abs=1e-9)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_params_round_trip_through_the_proposal(seed):
    config = random_config(np.random.default_rng(seed))
    for simplex in ("weights", "stick_breaking"):
        space = SearchSpace.of(SPACE, simplex)
        raw = space.to_proposal(space.to_params(config.model_dump(mode="json")))
        back = GeneratorConfig.model_validate(raw)
        for s in config.sizes:
            for f in ("data_ratio", "hole_ratio", "wait_ratio"):
                assert getattr(back.sizes[s], f) == pytest.approx(getattr(config.sizes[s], f), abs=1e-9)
        dists = space.distributions()
        assert set(dists) == set(space.to_params(config.model_dump(mode="json")))
        assert len(dists) == (24 if simplex == "weights" else 23)


def test_stick_breaking_with_uniform_inputs_is_a_flat_dirichlet():
    rng = np.random.default_rng(0)
    draws = np.array([sticks_to_simplex(list(rng.random(7))) for _ in range(4000)])
    assert np.allclose(draws.mean(axis=0), 1 / 8, atol=0.01)  # plain v_i = u_i would favour early sizes
    assert simplex_to_sticks(sticks_to_simplex([0.3] * 7)) == pytest.approx([0.3] * 7)
    assert simplex_to_weights([0.5, 0.25, 0.25]) == [1.0, 0.5, 0.5]


def test_objective():
    scores = {0: 0.2, 1: 0.5}
    assert objective_value(scores, 1, "improvement", None) == pytest.approx(0.3)
    assert objective_value(scores, 0, "improvement", 0.1) == pytest.approx(0.1)
    assert objective_value(scores, 0, "improvement", None) is None
    assert objective_value(scores, 1, "score", None) == 0.5


def _config(tmp_path, name, rounds=4, extra=()):
    return load_config("configs/mapf_simulated.yaml",
                       [f"output_dir={tmp_path}", f"run_name={name}", f"rounds={rounds}", "seed=3",
                        "engineer.name=optuna", "tasks_per_round=32", "testbed.eval_agents=[3]", *extra])


def _trials(run_dir):
    study = optuna.load_study(study_name="curriculum", storage=f"sqlite:///{run_dir}/optuna.db")
    return study.trials


def test_one_trial_per_round_in_sqlite_and_proposals_come_from_trials(tmp_path):
    result = run(_config(tmp_path, "a"))
    trials = _trials(result.run_dir)
    assert [t.user_attrs["round"] for t in trials] == [0, 1, 2, 3]
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    scores = [r.eval.score for r in result.history]
    baseline = RunDir.open(result.run_dir).path / "baseline_eval.json"
    assert baseline.is_file()
    assert trials[2].value == pytest.approx(scores[2] - scores[1])
    assert trials[3].value == pytest.approx(scores[3] - scores[2])  # the last round is told too
    space = SearchSpace.of(SPACE)
    # trial 0 is the starting config; trial r is what round r trained on
    assert space.to_params(result.history[0].proposal) == pytest.approx(trials[0].params)
    for r in (1, 2, 3):
        expected = GeneratorConfig.model_validate(space.to_proposal(trials[r].params))
        got = result.history[r].proposal["sizes"]
        for s, p in expected.sizes.items():
            assert got[s]["data_ratio"] == pytest.approx(p.data_ratio, abs=1e-9)
            assert got[s]["hole_ratio"] == pytest.approx(p.hole_ratio)


def test_resume_after_losing_rounds_is_idempotent(tmp_path):
    """A run that died after asking trial r+1 but before committing round r re-runs round r,
    reuses the pending trial and ends exactly like an uninterrupted run."""
    full = run(_config(tmp_path, "full"))
    crashed = run(_config(tmp_path, "crashed"))
    rd = RunDir.open(crashed.run_dir)
    for r in (2, 3):  # rounds 2 and 3 were never committed, trials 2 and 3 already exist
        shutil.rmtree(rd.round_dir(r))
    assert len(_trials(crashed.run_dir)) == 4
    resumed = run(_config(tmp_path, "crashed"), resume=crashed.run_dir)
    assert [r.eval.score for r in resumed.history] == [r.eval.score for r in full.history]
    assert [r.proposal for r in resumed.history] == [r.proposal for r in full.history]
    t_full, t_res = _trials(full.run_dir), _trials(crashed.run_dir)
    assert len(t_res) == 4
    assert [t.params for t in t_res] == [t.params for t in t_full]
    assert [t.value for t in t_res] == pytest.approx([t.value for t in t_full])
    assert resumed.history[2].design.design.notes["reused_pending_trial"] is True


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_samplers_and_score_objective(tmp_path, sampler):
    result = run(_config(tmp_path, sampler, rounds=3,
                         extra=[f"engineer.sampler={sampler}", "engineer.objective=score",
                                "engineer.simplex=stick_breaking", "eval_before_training=false"]))
    trials = _trials(result.run_dir)
    assert [t.value for t in trials] == pytest.approx([r.eval.score for r in result.history])


def test_improvement_without_baseline_marks_trial_zero_failed(tmp_path):
    result = run(_config(tmp_path, "nobase", rounds=2, extra=["eval_before_training=false"]))
    trials = _trials(result.run_dir)
    assert trials[0].state == optuna.trial.TrialState.FAIL
    assert trials[1].value == pytest.approx(result.history[1].eval.score - result.history[0].eval.score)


def test_a_study_left_before_the_first_commit_is_started_over(tmp_path):
    """A study from a start that committed no round (here: one orphan trial, asked and never
    keyed) is not this run's: the run starts its study over, as an uninterrupted run would."""
    clean = run(_config(tmp_path, "clean", rounds=3))
    (tmp_path / "dirty").mkdir()
    study = optuna.create_study(study_name="curriculum", storage=f"sqlite:///{tmp_path}/dirty/optuna.db",
                                direction="maximize")
    study.ask()  # asked, then the process died before keying it to a round
    dirty = run(_config(tmp_path, "dirty", rounds=3))
    trials = _trials(dirty.run_dir)
    assert all("round" in t.user_attrs for t in trials)
    keyed = [t for t in trials if "round" in t.user_attrs]
    assert [t.user_attrs["round"] for t in keyed] == [0, 1, 2]
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in keyed)
    assert [t.params for t in keyed] == [t.params for t in _trials(clean.run_dir)]
