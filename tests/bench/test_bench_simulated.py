"""The simulated learner: equations, answers scored by the real validator, determinism, save/restore."""

from __future__ import annotations

import math

import numpy as np
import pytest

from curriculum.config import load_config
from testbeds.mapf_frozenlake.config import uniform_config
from testbeds.mapf_frozenlake.instance import Instance
from testbeds.mapf_frozenlake.parse import parse_plan
from testbeds.mapf_frozenlake.testbed import MAPFTestbed, MAPFTestbedConfig
from testbeds.mapf_frozenlake.validate import validate
from trainers.simulated import (SIZES, SimulatedConfig, SimulatedTrainer, answer, difficulty, failed_plan,
                                render_plan, success_probabilities, suboptimal_plan, task_stream,
                                update_competence)


def _testbed() -> MAPFTestbed:
    return MAPFTestbed(MAPFTestbedConfig(eval_agents=[3], eval_instances_per_size=3), seed=0)


@pytest.fixture(scope="module")
def tasks():
    return _testbed().sample(uniform_config(0.2, 0.5), 48, seed=3)


def test_difficulty_and_probabilities_follow_the_documented_equations():
    cfg = SimulatedConfig()
    f = {"size": "5x5", "agents": 3, "hole_ratio": 0.2, "needs_wait": True}
    d = cfg.size_difficulty * 2 + cfg.agent_difficulty * 1 + cfg.hole_difficulty * 0.2 + cfg.wait_difficulty
    assert difficulty(f, cfg) == pytest.approx(d)
    p_valid, p_opt = success_probabilities(d + 0.5, d, cfg)
    assert p_valid == pytest.approx(1 / (1 + math.exp(-cfg.slope * 0.5)))
    assert p_opt == pytest.approx(1 / (1 + math.exp(-cfg.slope * (0.5 - cfg.optimal_margin))))
    assert p_opt < p_valid


def test_learning_peaks_at_the_frontier():
    """Tasks with p ≈ ½ teach more than far-too-easy or far-too-hard ones (no noise, no transfer)."""
    cfg = SimulatedConfig(noise=0.0, transfer=0.0, forgetting=0.0)
    base = {s: 2.0 for s in SIZES}
    gains = {}
    for name, size in (("easy", "3x3"), ("frontier", "5x5"), ("hard", "10x10")):
        feats = [{"size": size, "agents": 2, "hole_ratio": 0.0, "needs_wait": False}] * 10
        p, _ = success_probabilities(2.0, difficulty(feats[0], cfg), cfg)
        _, g = update_competence(base, feats, cfg, total_tasks=10, rng=np.random.default_rng(0))
        gains[name] = (p, g[size])
    assert gains["frontier"][1] > gains["easy"][1] and gains["frontier"][1] > gains["hard"][1]
    assert gains["frontier"][1] == pytest.approx(cfg.learning_rate * 4 * gains["frontier"][0]
                                                 * (1 - gains["frontier"][0]))


def test_transfer_and_forgetting():
    cfg = SimulatedConfig(noise=0.0, transfer=0.5, forgetting=0.4, steps_per_round=1, initial_competence=1.0)
    comp = {s: 3.0 for s in SIZES}
    feats = [{"size": "5x5", "agents": 2, "hole_ratio": 0.2, "needs_wait": False}] * 8
    new, gains = update_competence(comp, feats, cfg, total_tasks=8, rng=np.random.default_rng(0))
    assert gains["4x4"] == pytest.approx(0.5 * gains["5x5"]) and gains["3x3"] == pytest.approx(0.25 * gains["5x5"])
    # 10x10 gets exposure 0.5^5 < e_min: it forgets toward the floor (1.0).
    exposure = 0.5 ** 5
    expected = 3.0 + gains["10x10"] - 0.4 * (1 - exposure / cfg.min_exposure) * 2.0
    assert new["10x10"] == pytest.approx(expected)
    assert new["5x5"] > 3.0


def test_answers_are_canonical_text_scored_by_the_real_validator(tasks):
    cfg = SimulatedConfig()
    strong = {s: 50.0 for s in SIZES}
    weak = {s: -50.0 for s in SIZES}
    for t in tasks[:20]:
        inst = Instance.from_dict(t.data)
        text, outcome = answer(t, strong, cfg, task_stream(1, 2, t.id))
        v = validate(inst, text)
        assert outcome == "optimal" and v.valid and v.optimal
        assert parse_plan(text).format == "lines"
        assert parse_plan(render_plan(inst.optimal_plan)).paths == inst.optimal_plan
        text, outcome = answer(t, weak, cfg, task_stream(1, 2, t.id))
        v = validate(inst, text)
        assert outcome.startswith("failed") and not v.valid, (outcome, text)


def test_every_failure_mode_fails_a_check_and_suboptimal_plans_are_valid(tasks):
    rng = np.random.default_rng(0)
    failed_checks = set()
    n_sub = 0
    for t in tasks:
        inst = Instance.from_dict(t.data)
        for mode in ("truncate", "skip", "drop_agent", "conflict", "garbled"):
            v = validate(inst, failed_plan(inst, mode, rng))
            assert not v.valid
            failed_checks.update(v.failed)
        plan = suboptimal_plan(inst, rng)
        v = validate(inst, plan)
        assert v.valid
        n_sub += not v.optimal
    assert {"parsable", "goal_reached", "legal_move", "agent_count", "conflict_free"} <= failed_checks
    assert n_sub > len(tasks) // 2


def _trainer(tmp_path, **kw):
    cfg = load_config(None, ["trainer.name=simulated", f"output_dir={tmp_path}"]
                      + [f"trainer.{k}={v}" for k, v in kw.items()])
    tb = _testbed()
    tr = SimulatedTrainer(cfg, tb)
    tr.setup(None)
    return tr, tb


def test_deterministic_and_restorable(tmp_path, tasks):
    a, tb = _trainer(tmp_path)
    b, _ = _trainer(tmp_path)
    ma = a.train_round(tasks, round_index=0, seed=11)
    mb = b.train_round(tasks, round_index=0, seed=11)
    assert ma == mb
    ea, eb = tb.evaluate(a.policy(), seed=5), tb.evaluate(b.policy(), seed=5)
    assert ea.metrics == eb.metrics
    a.save(tmp_path / "ckpt")
    c, _ = _trainer(tmp_path)
    c.setup(tmp_path / "ckpt")
    assert c.competence == a.competence
    assert tb.evaluate(c.policy(), seed=5).metrics == ea.metrics
    assert a.train_round(tasks, round_index=1, seed=12) == c.train_round(tasks, round_index=1, seed=12)
    d, _ = _trainer(tmp_path)
    assert d.train_round(tasks, round_index=0, seed=99) != ma  # the seed matters (noise, answers)


def test_training_raises_the_eval_score(tmp_path):
    tr, tb = _trainer(tmp_path, noise=0.0)
    before = tb.evaluate(tr.policy(), seed=0).score
    small = uniform_config(0.1, 0.0)
    for r in range(4):
        tr.train_round(tb.sample(small, 32, seed=r), round_index=r, seed=r)
    after = tb.evaluate(tr.policy(), seed=0).score
    assert after > before + 0.05
