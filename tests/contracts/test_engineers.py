"""One suite every registered engineer passes (a new engineer gets these tests for free).

Each engineer designs two rounds on the MAPF-FrozenLake testbed from a synthetic history, with
a scripted policy for engineers that ask a model. The contract: ``design`` returns a ``Design``;
``project`` turns its raw proposal into a legal one; the engineer's state is JSON and survives
a save/load round trip; the same seed gives the same design.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from curriculum.core.records import Design, RoundReport
from curriculum.core.types import Completion, EvalReport
from curriculum.registry import ENGINEERS, SHIPPED
from engineers.base import DesignContext

# Engineers whose proposals are not generator configs (SPADE designs programs) have their own suites.
PARAMETRIC = [name for name in SHIPPED["engineer"] if name != "spade"]


class ScriptedPolicy:
    """Answers every prompt with the same short reasoning and a JSON proposal."""

    def __init__(self, proposal: dict) -> None:
        self.text = "The 3x3 maps are solved; move budget to larger maps.\n```json\n" + json.dumps(proposal) + "\n```"

    def generate(self, tasks, *, max_new_tokens=None, temperature=None, seed=0):
        return [Completion(text=self.text, num_tokens=len(self.text) // 4) for _ in tasks]


@pytest.fixture(scope="module")
def testbed():
    from curriculum.config import load_config
    from curriculum.loop import build_testbed

    config = load_config(None, ["testbed.eval_agents=[3]", "testbed.eval_instances_per_size=1"])
    return build_testbed(config)


def _report(testbed, index: int, proposal, score: float) -> RoundReport:
    sizes = list(proposal.model_dump()["sizes"])
    metrics = {f"valid_rate/3agents/{s}": max(0.0, 1 - i / 6) * score for i, s in enumerate(sizes)}
    metrics["valid_rate/3agents"] = score
    return RoundReport(round=index, proposal=proposal.model_dump(mode="json"),
                       train_metrics={"train/mean_reward": score}, eval=EvalReport(score=score, metrics=metrics))


def _context(testbed, engineer_rounds: int, seed: int, proposal, history) -> DesignContext:
    return DesignContext(
        round=len(history) - 1, total_rounds=engineer_rounds, history=history, proposal=proposal,
        testbed=testbed, rng=np.random.default_rng(seed),
        policy=ScriptedPolicy(testbed.random_proposal(np.random.default_rng(99)).model_dump(mode="json")),
        base_policy=None, run_info={"epochs_per_round": 3.0},
    )


def _make(name: str, tmp_path):
    entry = ENGINEERS.get(name)
    config = entry.load_config().model_validate({"name": name})
    return entry.load()(config, run_dir=str(tmp_path))


@pytest.mark.parametrize("name", PARAMETRIC)
def test_engineer_contract(name, testbed, tmp_path):
    engineer = _make(name, tmp_path / "a")
    (tmp_path / "a").mkdir(exist_ok=True)
    proposal = testbed.initial_proposal(np.random.default_rng(0))
    engineer.on_run_start(testbed, proposal)
    history: list[RoundReport] = []
    for index, score in enumerate((0.2, 0.35)):
        history.append(_report(testbed, index, proposal, score))
        design = engineer.design(_context(testbed, 3, index, proposal, history))
        assert isinstance(design, Design)
        legal, changes = testbed.project(design.raw, proposal)
        assert testbed.proposal_model.model_validate(legal.model_dump()) == legal
        state = engineer.state_dict()
        json.dumps(state)  # the run dir stores it as JSON
        engineer.load_state_dict(json.loads(json.dumps(state)))
        engineer.on_round_end(history[-1])
        proposal = legal
    engineer.close()


@pytest.mark.parametrize("name", PARAMETRIC)
def test_engineer_same_seed_same_design(name, testbed, tmp_path):
    designs = []
    for run in ("x", "y"):
        (tmp_path / run).mkdir()
        engineer = _make(name, tmp_path / run)
        proposal = testbed.initial_proposal(np.random.default_rng(0))
        engineer.on_run_start(testbed, proposal)
        history = [_report(testbed, 0, proposal, 0.3)]
        design = engineer.design(_context(testbed, 3, 7, proposal, history))
        designs.append(testbed.project(design.raw, proposal)[0].model_dump())
        engineer.close()
    assert designs[0] == designs[1]
