"""The checkpoint engineer on reasoning_gym: module F renders the per-task, per-level failure
breakdown through the declared space, and a scripted model's answer edits the task-level shares."""

from __future__ import annotations

import json

import numpy as np
import pytest
from checkpoint_fakes import ScriptedPolicy

from curriculum.core.breakdown import EvalBreakdown, OutcomeCounts
from curriculum.core.records import RoundReport
from curriculum.core.types import Completion, Task
from engineers.base import DesignContext
from engineers.checkpoint.config import CheckpointEngineerConfig
from engineers.checkpoint.context import render_failures
from engineers.checkpoint.engineer import CheckpointEngineer
from testbeds.reasoning_gym.testbed import ReasoningGymTestbed, ReasoningGymTestbedConfig


class LevelZeroSolver:
    """Answers level-0 items correctly, boxes a wrong answer at level 1, and never boxes beyond."""

    def generate(self, tasks: list[Task], *, max_new_tokens=None, temperature=None, seed=0) -> list[Completion]:
        out = []
        for t in tasks:
            level = t.features["level"]
            text = (f"\\boxed{{{t.data['answer']}}}" if level == 0 else
                    "\\boxed{banana}" if level == 1 else "I do not know.")
            out.append(Completion(text=text, num_tokens=len(text) // 4))
        return out


@pytest.fixture(scope="module")
def testbed() -> ReasoningGymTestbed:
    return ReasoningGymTestbed(ReasoningGymTestbedConfig(tasks=["gcd", "chain_sum"], max_levels=3, eval_per_bucket=2))


@pytest.fixture(scope="module")
def report(testbed):
    return testbed.evaluate(LevelZeroSolver())


def test_eval_breakdown_counts_outcomes_per_bucket(testbed, report):
    assert report.breakdown.buckets["gcd:0"] == OutcomeCounts(n=2, correct=2,
                                                              failures={"partial": 0, "wrong": 0, "no_answer": 0})
    assert report.breakdown.buckets["gcd:1"].failures["wrong"] == 2
    assert report.breakdown.buckets["chain_sum:2"].failures["no_answer"] == 2
    assert set(report.breakdown.buckets) == set(testbed.proposal_space.buckets)


def test_eval_budget_counts_every_task_level(testbed):
    prompts, tokens = ReasoningGymTestbed.eval_budget(testbed.config, 64)
    assert prompts == len(testbed.eval_tasks()) == 2 * 6 and tokens == 64


def test_failure_module_renders_tasks_and_levels_through_the_space(testbed, report):
    text = render_failures(report.breakdown, report.bucket_scores, testbed.proposal_space, testbed.bucket_groups)
    lines = text.splitlines()
    assert lines[0] == "gcd: accuracy 33.3%" and "chain_sum: accuracy 33.3%" in lines
    rows = {line.split()[0]: line for line in lines if line.startswith("  ")}
    assert list(rows) == list(testbed.proposal_space.buckets)
    assert "n=2" in rows["gcd:0"] and "accuracy 100.0%" in rows["gcd:0"] and rows["gcd:0"].endswith("failures: none")
    assert rows["gcd:1"].endswith("failures: wrong 2")
    assert rows["chain_sum:2"].endswith("failures: no_answer 2")
    assert render_failures(EvalBreakdown(), {}, testbed.proposal_space, testbed.bucket_groups) == "(no evaluation results)"


def _ctx(testbed, report, policy) -> DesignContext:
    proposal = testbed.initial_proposal(np.random.default_rng(0))
    history = [RoundReport(round=0, proposal=proposal.model_dump(mode="json"), train_metrics={}, eval=report)]
    return DesignContext(round=0, total_rounds=3, history=history, proposal=proposal, testbed=testbed,
                         rng=np.random.default_rng(0), policy=policy, run_info={"epochs_per_round": 1.0})


ANSWER = {"gcd:0": 0.05, "gcd:1": 0.45, "gcd:2": 0.1, "chain_sum:0": 0.05, "chain_sum:1": 0.3, "chain_sum:2": 0.05}


@pytest.mark.parametrize("layout", ["container", "bare numbers at the top level"])
def test_scripted_answer_becomes_the_next_reasoning_gym_proposal(testbed, report, layout):
    body = ({"buckets": {b: {"share": s} for b, s in ANSWER.items()}} if layout == "container" else ANSWER)
    text = ("Level 0 is solved and level 1 gives wrong answers, so level 1 gets most data.\n```json\n"
            + json.dumps({"summary": "gcd:0 is mastered; more gcd:1.", **body}) + "\n```")
    engineer = CheckpointEngineer(CheckpointEngineerConfig())
    ctx = _ctx(testbed, report, ScriptedPolicy([text]))
    design = engineer.design(ctx)
    d = design.diagnostics
    assert d["status"] == "usable config" and d["usable_output"]
    legal, _ = testbed.project(design.raw, ctx.proposal)
    assert {b: round(v.share, 6) for b, v in legal.buckets.items()} == ANSWER
    assert d["edits_applied"]["scope"] == "global" and "gcd:1" in d["edits_applied"]["buckets"]
    assert d["frontier"]["groups"]["at"] == ["gcd:0", "gcd:1", "chain_sum:0", "chain_sum:1"]
    assert d["frontier"]["mass_after"]["at"] == pytest.approx(0.85)
    assert d["summary_check"]["claims"] == [{"bucket": "gcd:0", "claim": "mastered"}]
    assert not d["summary_check"]["contradicts"]


def test_prompt_describes_the_reasoning_gym_space_not_mapf(testbed, report):
    engineer = CheckpointEngineer(CheckpointEngineerConfig(context="V6"))
    messages = engineer.messages(_ctx(testbed, report, None), engineer.config.context_spec())
    prompt = messages[1]["content"]
    assert "## F. Failure breakdown" in prompt and "gcd:1" in prompt and "failures: wrong 2" in prompt
    assert "<task>:<level>" in prompt  # the reasoning_gym guideline
    assert '"buckets": the task levels you change, each with any of share.' in prompt
    assert '"<task level>": {"share": <share>}' in prompt
    for mapf in ("map size", "data_ratio", "hole_ratio", "wait_ratio", "sizes"):
        assert mapf not in prompt, mapf
