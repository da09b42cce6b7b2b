"""The bucket engineers (learnability, rlve, plr, checkpoint) on every testbed with a bucket space.

Same contract as ``test_engineers.py`` (design → legal proposal, JSON state round trip, same
seed → same design), on MAPF-FrozenLake and reasoning-gym, from a history whose eval and train
metrics are per bucket; plus: the design really moves budget (it is not the previous proposal).
The checkpoint engineer's model is scripted: it answers, in prose plus a JSON block, the
testbed's random proposal in the space's own layout, which the engineer must parse and apply.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from curriculum.config import load_config
from curriculum.core.buckets import space_of
from curriculum.core.records import RoundReport
from curriculum.core.types import EvalReport
from curriculum.loop import build_testbed
from curriculum.registry import ENGINEERS
from engineers.base import DesignContext
from tests.contracts.test_engineers import ScriptedPolicy
from curriculum.core.bucket_stats import bucket_metrics

BUCKET_ENGINEERS = ["learnability", "rlve", "plr", "checkpoint"]
TESTBEDS = {"mapf_frozenlake": ["testbed.eval_agents=[3]", "testbed.eval_instances_per_size=1"],
            "reasoning_gym": ["testbed.eval_per_bucket=1"]}


@pytest.fixture(scope="module", params=list(TESTBEDS))
def testbed(request):
    return build_testbed(load_config(None, [f"testbed.name={request.param}", *TESTBEDS[request.param]]))


def _report(testbed, index: int, proposal) -> RoundReport:
    space = space_of(testbed)
    n = len(space.buckets)
    scores = {b: 1.0 - i / max(1, n - 1) for i, b in enumerate(space.buckets)}
    buckets = [b for b in space.buckets for _ in range(8)]
    rewards = [float(i % 8 < 8 * scores[b]) for i, b in enumerate(buckets)]
    train = bucket_metrics(buckets, [i // 2 for i in range(len(buckets))], rewards)
    metrics = {"score": 0.5}
    return RoundReport(round=index, proposal=proposal.model_dump(mode="json"), train_metrics=train,
                       eval=EvalReport(score=0.5, metrics=metrics, bucket_scores=scores))


def _design(name, testbed, tmp_path, seed):
    entry = ENGINEERS.get(name)
    engineer = entry.load()(entry.load_config().model_validate({"name": name}), run_dir=str(tmp_path))
    proposal = testbed.initial_proposal(np.random.default_rng(0))
    engineer.on_run_start(testbed, proposal)
    history = [_report(testbed, 0, proposal)]
    ctx = DesignContext(round=0, total_rounds=3, history=history, proposal=proposal, testbed=testbed,
                        rng=np.random.default_rng(seed), policy=_scripted(testbed),
                        run_info={"epochs_per_round": 1.0})
    design = engineer.design(ctx)
    state = engineer.state_dict()
    engineer.load_state_dict(json.loads(json.dumps(state)))
    json.dumps(design.notes)
    engineer.close()
    return proposal, design


def _scripted(testbed) -> ScriptedPolicy:
    """The checkpoint engineer's model: reasoning, then the testbed's random proposal as JSON."""
    proposal = testbed.random_proposal(np.random.default_rng(99)).model_dump(mode="json")
    return ScriptedPolicy("The easiest buckets are solved; I move budget up.\n```json\n"
                          + json.dumps({"summary": "more budget where I fail", **proposal}) + "\n```")


@pytest.mark.parametrize("name", BUCKET_ENGINEERS)
def test_bucket_engineer_contract(name, testbed, tmp_path):
    proposal, design = _design(name, testbed, tmp_path, seed=1)
    legal, changes = testbed.project(design.raw, proposal)
    assert testbed.proposal_model.model_validate(legal.model_dump()) == legal
    assert not [c for c in changes if "unparsable" in c.reason or "unknown" in c.reason]
    assert legal != proposal, f"{name} left the budget where it was"
    _, again = _design(name, testbed, tmp_path, seed=1)
    assert testbed.project(again.raw, proposal)[0] == legal
