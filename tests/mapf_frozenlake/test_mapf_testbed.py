"""The Testbed implementation, the gymnasium env and the CLI, end to end on tiny suites."""

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from typer.testing import CliRunner

import testbeds  # noqa: F401  (registers MAPFFrozenLake-v0)
from curriculum.core.types import Completion
from testbeds.base import Testbed
from testbeds.mapf_frozenlake.config import GeneratorConfig, uniform_config
from testbeds.mapf_frozenlake.instance import Instance
from testbeds.mapf_frozenlake.parse import format_plan
from testbeds.mapf_frozenlake.testbed import MAPFTestbed, MAPFTestbedConfig


@pytest.fixture
def tb(tmp_path, monkeypatch):
    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path))
    cfg = MAPFTestbedConfig(eval_agents=[3, 4], eval_instances_per_size=1, eval_seed=7)
    return MAPFTestbed(cfg, seed=0)


class OraclePolicy:
    """Answers with the stored optimal plan, or garbage for every ``bad``-th task."""

    def __init__(self, bad: int = 0):
        self.bad = bad
        self.calls = 0

    def generate(self, tasks, *, max_new_tokens=None, temperature=None, seed=0):
        self.calls += 1
        out = []
        for i, t in enumerate(tasks):
            inst = Instance.from_dict(t.data)
            if self.bad and i % self.bad == 0:
                out.append(Completion(text="I give up", num_tokens=3))
            else:
                out.append(Completion(text=format_plan(inst.optimal_plan), num_tokens=40))
        return out


def test_is_a_testbed(tb):
    assert isinstance(tb, Testbed)
    assert MAPFTestbed.proposal_model is GeneratorConfig
    p = tb.initial_proposal(np.random.default_rng(0))
    assert isinstance(p, GeneratorConfig)
    fixed = MAPFTestbed(MAPFTestbedConfig(initial_proposal=uniform_config(0.1, 0.1)), seed=0)
    assert fixed.initial_proposal(np.random.default_rng(0)) == uniform_config(0.1, 0.1)
    cfg, changes = tb.project({"5x5": {"hole_ratio": 0.9}}, p)
    assert cfg.sizes["5x5"].hole_ratio == 0.5 and changes


def test_sample_deterministic_and_features(tb):
    p = tb.random_proposal(np.random.default_rng(1))
    a = tb.sample(p, 30, seed=5)
    b = tb.sample(p, 30, seed=5)
    assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
    assert len({t.id for t in a}) == 30
    rep = json.loads(json.dumps(tb.last_generation_report))
    assert sum(r["n"] for r in rep.values()) == 30 and set(rep["5x5"]) >= {
        "hole_ratio_requested", "hole_ratio_achieved", "wait_ratio_requested", "wait_ratio_achieved"}
    for t in a:
        f = t.features
        assert set(f) == {"size", "agents", "hole_ratio", "needs_wait", "optimal_cost", "bucket"}
        assert f["agents"] == 2 and t.data["optimal_cost"] == f["optimal_cost"]
        assert t.messages[-1]["role"] == "user" and "Agent 2" in t.messages[-1]["content"]


def test_score_and_ema(tb):
    t = tb.sample(uniform_config(), 4, seed=0)[0]
    inst = Instance.from_dict(t.data)
    r, info = tb.score(t, Completion(text=format_plan(inst.optimal_plan), num_tokens=100))
    assert r == pytest.approx(0.5) and info["valid"] and info["optimal"]
    r, info = tb.score(t, Completion(text="nope", num_tokens=2798))
    assert r == pytest.approx(-0.25) and not info["valid"]
    for _ in range(40):
        tb.observe_training_batch([Completion(text="", num_tokens=10)] * 4)
    r, _ = tb.score(t, Completion(text=format_plan(inst.optimal_plan), num_tokens=100))
    assert r == pytest.approx(0.8)
    state = json.loads(json.dumps(tb.state_dict()))
    fresh = MAPFTestbed(tb.config, seed=0)
    fresh.load_state_dict(state)
    assert fresh.score(t, Completion(text="x", num_tokens=3000))[0] == tb.score(
        t, Completion(text="x", num_tokens=3000))[0]


def test_evaluate(tb):
    pol = OraclePolicy()
    rep = tb.evaluate(pol)
    assert pol.calls == 1
    assert rep.score == 1.0
    assert rep.metrics["valid_rate/3agents"] == 1.0 and rep.metrics["optimal_rate/4agents/5x5"] == 1.0
    assert rep.metrics["cost_ratio/3agents"] == 1.0 and rep.metrics["mean_tokens"] == 40
    fb = rep.breakdown
    assert set(fb.suites) == {"3agents", "4agents"}
    assert fb.suites["3agents"].n == 8 and len(fb.suites["3agents"].sizes) == 8
    rep2 = tb.evaluate(OraclePolicy(bad=2))
    assert rep2.score == pytest.approx(0.5)
    assert rep2.breakdown.suites["3agents"].failures["parsable"] == 4
    assert rep2.samples and any(not s["verdict"]["valid"] for s in rep2.samples)
    table = rep2.breakdown.table()
    assert "3agents: valid 50.0%" in table and "parsable" in table
    # suites are cached on disk and identical when rebuilt
    again = MAPFTestbed(tb.config, seed=1)
    assert [i.to_json() for i in again.eval_instances()] == [i.to_json() for i in tb.eval_instances()]


def test_env_checker_and_determinism():
    env = gym.make("MAPFFrozenLake-v0")
    check_env(env.unwrapped, skip_render_check=True)
    o1, i1 = env.reset(seed=11)
    o2, i2 = env.reset(seed=11)
    assert o1 == o2 and i1 == i2
    inst = Instance.from_dict(i1["instance"])
    _, r, term, trunc, info = env.step(format_plan(inst.optimal_plan))
    assert r == 1.0 and term and not trunc and info["valid"]
    env.reset(seed=11)
    _, r, _, _, info = env.step("bad")
    assert r == 0.0 and info["checks"]["parsable"] is False


def test_cli(tmp_path):
    from testbeds.mapf_frozenlake.cli import app

    runner = CliRunner()
    f = tmp_path / "x.jsonl"
    f.write_text('{"id":"a","h":3,"w":3,"holes":[[1,1]],"starts":[[0,0],[2,2]],"goals":[[2,2],[0,0]]}\n'
                 '{"id":"b","h":1,"w":3,"holes":[],"starts":[[0,0],[0,2]],"goals":[[0,2],[0,0]]}\n')
    res = runner.invoke(app, ["solve", str(f)])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.output.splitlines()]
    assert lines[0]["status"] == "solved" and lines[0]["cost"] == 8
    assert lines[1]["status"] == "unsolvable" and lines[1]["plan"] is None
    g = tmp_path / "r.jsonl"
    g.write_text(json.dumps({"instance": {"h": 2, "w": 2, "holes": [], "starts": [[0, 0]],
                                          "goals": [[0, 1]]}, "response": "Agent 1: (0,0) (0,1)"})
                 + "\nnot json\n")
    res = runner.invoke(app, ["validate", str(g)])
    assert res.exit_code == 1, res.output  # one line failed
    a, b = [json.loads(x) for x in res.output.splitlines()]
    assert a["valid"] and a["optimal"] and a["reward"] == pytest.approx(0.5)
    assert b["line"] == 2 and "bad JSON" in b["error"]
    res = runner.invoke(app, ["generate", "--n", "5", "--agents", "3", "--seed", "1"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.output.splitlines() if x.startswith('{"id"')]
    assert len(lines) == 5 and all(len(x["starts"]) == 3 and "optimal_plan" in x for x in lines)
    for cmd in ("solve", "validate", "generate"):
        assert "Example" in runner.invoke(app, [cmd, "--help"]).output
