"""No engineer ever receives a test-suite result: every registered engineer, on every testbed it
fits, designs from a history whose test evals are poisoned with sentinel numbers and strings,
and the sentinel appears nowhere in what it received (``DesignContext.history``), what it asked
its model (the prompts its policy got), what it returned (``Design``) or what it keeps
(``state_dict``). A real run (the loop, the simulated learner) proves the controller hands
engineers that view: its rounds hold test results, the engineer's inputs never do."""

from __future__ import annotations

import json

import numpy as np
import pytest

from curriculum.config import load_config
from curriculum.core.records import RoundReport
from curriculum.core.spaces import BucketSpace
from curriculum.core.types import EvalReport
from curriculum.registry import ENGINEERS
from curriculum.rundir import RunDir
from engineers.base import DesignContext
from tests.contracts.test_engineers import PAIRS, _make, _policy, _report, _testbed

SENTINEL = 0.8765
"""Every test-suite number; its usual renderings are searched for."""
SENTINEL_TEXT = "TEST-SUITE-SENTINEL"
RENDERINGS = (SENTINEL_TEXT, "0.8765", "87.65", "87.7", "0.877")


def _leaks(value) -> list[str]:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return [r for r in RENDERINGS if r in text]


def _poisoned_test(testbed) -> EvalReport:
    space = testbed.proposal_space
    buckets = space.buckets if isinstance(space, BucketSpace) else ()
    return EvalReport(score=SENTINEL, suite="test", metrics={"score": SENTINEL, "valid_rate": SENTINEL,
                                                             f"{SENTINEL_TEXT}/rate": SENTINEL},
                      breakdown={SENTINEL_TEXT: {"n": 1, "valid_rate": SENTINEL}},
                      bucket_scores={b: SENTINEL for b in buckets},
                      samples=[{"prompt": SENTINEL_TEXT, "response": SENTINEL_TEXT}],
                      task_scores={f"{SENTINEL_TEXT}-{i}": SENTINEL for i in range(3)})


class RecordingPolicy:
    """The contract's scripted policy, keeping every prompt it is asked."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.prompts: list = []

    def generate(self, tasks, **kw):
        self.prompts.extend(t.messages for t in tasks)
        return self.inner.generate(tasks, **kw)


@pytest.mark.parametrize(("name", "testbed_name"), PAIRS)
def test_no_engineer_receives_test_results(name, testbed_name, tmp_path):
    testbed = _testbed(testbed_name)
    engineer = _make(name, tmp_path / "run")
    proposal = testbed.initial_proposal(np.random.default_rng(0))
    policy = RecordingPolicy(_policy(testbed))
    try:
        engineer.on_run_start(testbed, proposal)
        history: list[RoundReport] = []
        for index, score in enumerate((0.2, 0.35)):
            report = _report(testbed, index, proposal, score)
            report.test = _poisoned_test(testbed)
            assert _leaks(report.model_dump(mode="json")), "the poison must be in the full record"
            history.append(report)
            ctx = DesignContext(round=index, total_rounds=3, history=history, proposal=proposal, testbed=testbed,
                                rng=np.random.default_rng(index), policy=policy, base_policy=None,
                                run_info={"epochs_per_round": 3.0})
            assert all(r.test is None for r in ctx.history)
            assert not _leaks([r.model_dump(mode="json") for r in ctx.history])
            design = engineer.design(ctx)
            assert not _leaks(design.model_dump(mode="json")), f"{name}'s design quotes test results"
            assert not _leaks(policy.prompts), f"{name} showed test results to its model"
            assert not _leaks(engineer.state_dict())
            engineer.on_round_end(report.engineer_view())
            proposal = testbed.project(design.raw, proposal)[0]
        assert history[-1].test is not None, "the controller's own records keep the test results"
    finally:
        engineer.close()


LOOP_ENGINEERS = sorted({e for e, t in PAIRS if t == "mapf_frozenlake"} - {"checkpoint"})
"""The checkpoint engineer asks the policy to design, which the simulated learner cannot; its
inputs are covered above."""


@pytest.mark.parametrize("name", LOOP_ENGINEERS)
def test_a_run_hands_engineers_no_test_results(name, tmp_path, monkeypatch):
    import curriculum.loop as loop

    seen: list[dict] = []
    build = loop.build_engineer

    def spying_build(config, run_dir):
        engineer = build(config, run_dir)
        design, round_end = engineer.design, engineer.on_round_end

        def spy_design(ctx):
            seen.append({"history": [r.model_dump(mode="json") for r in ctx.history]})
            return design(ctx)

        def spy_round_end(report):
            seen.append({"round_end": report.model_dump(mode="json")})
            return round_end(report)

        engineer.design, engineer.on_round_end = spy_design, spy_round_end
        return engineer

    monkeypatch.setattr(loop, "build_engineer", spying_build)
    config = load_config(None, ["trainer.name=simulated", f"engineer.name={name}", "testbed.eval_agents=[2]",
                                "testbed.eval_instances_per_size=2", "testbed.eval_sizes=[3x3,4x4]",
                                "tasks_per_round=8", "rounds=3", "eval_before_training=true",
                                f"output_dir={tmp_path}", "run_name=spy"])
    result = loop.run(config)
    run = RunDir.open(result.run_dir)
    assert all(r.test is not None and r.test.suite == "test" for r in run.history())
    assert (run.path / "baseline_test_eval.json").is_file()
    test_ids = {i for r in run.history() for i in r.test.task_scores}
    assert test_ids and all(i.startswith("test-") for i in test_ids)
    assert len([s for s in seen if "history" in s]) == 2 and len([s for s in seen if "round_end" in s]) == 3
    received = json.dumps(seen)
    assert '"test": null' in received and "test-k" not in received
    assert all(h.get("test") is None for s in seen for h in s.get("history", [s.get("round_end")]))
