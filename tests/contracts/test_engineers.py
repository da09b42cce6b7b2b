"""One suite every registered engineer passes on every registered testbed it declares it fits
(``registry.fitting_pairs``): a new engineer or testbed gets these tests for free.

Each engineer designs two rounds from a synthetic history, with a scripted policy for engineers
that ask a model (a JSON proposal for bucket spaces, an admissible game program for pools). The
contract: ``design`` returns a ``Design``; ``project`` turns its raw proposal into a legal one;
the engineer's state is JSON and survives a save/load round trip; the same seed gives the same
design.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from curriculum.core.records import Design, RoundReport
from curriculum.core.spaces import BucketSpace
from curriculum.core.types import Completion, EvalReport
from curriculum.registry import ENGINEERS, fitting_pairs, shipped
from curriculum.stem import shares_round0
from engineers.base import DesignContext

# Every shipped engineer and every one an installed package registers through an entry point (test
# doubles that other suites register are not plugins) on every testbed it fits.
PAIRS = [(e, t) for e, t in fitting_pairs()
         if e in shipped()["engineer"] or ENGINEERS.get(e).source != "curriculum"]
GAME = (Path(__file__).resolve().parents[1] / "spade" / "fixtures" / "games_guess_ok.out").read_text()
FAST_SANDBOX = dict(workers=1, call_deadline_s=2.0, load_deadline_s=4.0, supervisor_grace_s=1.0, memory_mb=256)
# Settings that keep a contract run small (engineers) or give a testbed a non-empty start (testbeds).
ENGINEER_SETTINGS = {"spade": {"corpus": "none", "designs_per_round": 1, "diversity": {"embedding": "tfidf"},
                               "sandbox": FAST_SANDBOX}}
TESTBED_SETTINGS = {"mapf_frozenlake": ["testbed.eval_agents=[3]", "testbed.eval_instances_per_size=1"],
                    "spade_pool": ["testbed.initial_pool=reasoning_gym", "testbed.reasoning_gym_items=12"]}


class ScriptedPolicy:
    """Answers every prompt with the same text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def generate(self, tasks, *, max_new_tokens=None, temperature=None, seed=0):
        return [Completion(text=self.text, num_tokens=len(self.text) // 4) for _ in tasks]


@cache
def _testbed(name: str):
    from curriculum.config import load_config
    from curriculum.loop import build_testbed

    return build_testbed(load_config(None, [f"testbed.name={name}", *TESTBED_SETTINGS.get(name, [])]))


def _policy(testbed) -> ScriptedPolicy:
    if isinstance(testbed.proposal_space, BucketSpace):
        proposal = testbed.random_proposal(np.random.default_rng(99)).model_dump(mode="json")
        return ScriptedPolicy("The easy buckets are solved; move budget up.\n```json\n" + json.dumps(proposal) + "\n```")
    return ScriptedPolicy(GAME)


def _report(testbed, index: int, proposal, score: float) -> RoundReport:
    space = testbed.proposal_space
    buckets = space.buckets if isinstance(space, BucketSpace) else ()
    scores = {b: max(0.0, 1 - i / 6) * score for i, b in enumerate(buckets)}
    return RoundReport(round=index, proposal=proposal.model_dump(mode="json"),
                       train_metrics={"train/mean_reward": score},
                       eval=EvalReport(score=score, metrics={"score": score}, bucket_scores=scores))


def _context(testbed, seed: int, proposal, history) -> DesignContext:
    return DesignContext(round=len(history) - 1, total_rounds=3, history=history, proposal=proposal,
                         testbed=testbed, rng=np.random.default_rng(seed), policy=_policy(testbed),
                         base_policy=None, run_info={"epochs_per_round": 3.0})


def _make(name: str, run_dir: Path):
    run_dir.mkdir(parents=True, exist_ok=True)
    entry = ENGINEERS.get(name)
    config = entry.load_config().model_validate({"name": name, **ENGINEER_SETTINGS.get(name, {})})
    return entry.load()(config, run_dir=str(run_dir))


def test_every_shipped_engineer_fits_some_testbed():
    assert {e for e, _ in PAIRS} >= set(shipped()["engineer"])


@pytest.mark.parametrize(("name", "testbed_name"), PAIRS)
def test_engineer_contract(name, testbed_name, tmp_path):
    testbed = _testbed(testbed_name)
    engineer = _make(name, tmp_path / "a")
    proposal = testbed.initial_proposal(np.random.default_rng(0))
    try:
        engineer.on_run_start(testbed, proposal)
        history: list[RoundReport] = []
        for index, score in enumerate((0.2, 0.35)):
            history.append(_report(testbed, index, proposal, score))
            design = engineer.design(_context(testbed, index, proposal, history))
            assert isinstance(design, Design)
            legal, changes = testbed.project(design.raw, proposal)
            assert testbed.proposal_model.model_validate(legal.model_dump()) == legal
            state = engineer.state_dict()
            engineer.load_state_dict(json.loads(json.dumps(state)))  # the run dir stores it as JSON
            engineer.on_round_end(history[-1])
            proposal = legal
    finally:
        engineer.close()


def _round0_design(name: str, testbed, run_dir: Path, seed: int, state: dict | None = None) -> dict:
    """A new engineer's design after round 0 (projected); ``state``: loaded first, as a resume does."""
    engineer = _make(name, run_dir)
    proposal = testbed.initial_proposal(np.random.default_rng(0))
    try:
        if state is not None:
            engineer.load_state_dict(state)
        engineer.on_run_start(testbed, proposal)
        design = engineer.design(_context(testbed, seed, proposal, [_report(testbed, 0, proposal, 0.3)]))
        return testbed.project(design.raw, proposal)[0].model_dump()
    finally:
        engineer.close()


@pytest.mark.parametrize(("name", "testbed_name"), PAIRS)
def test_engineer_same_seed_same_design(name, testbed_name, tmp_path):
    testbed = _testbed(testbed_name)
    assert _round0_design(name, testbed, tmp_path / "x", 7) == _round0_design(name, testbed, tmp_path / "y", 7)


@pytest.mark.parametrize(("name", "testbed_name"),
                         [(e, t) for e, t in PAIRS if shares_round0(ENGINEERS.get(e).load())])
def test_engineer_started_from_a_shared_round0_designs_as_its_own_run(name, testbed_name, tmp_path):
    """``compare``'s fork (``curriculum.stem``) gives a run the fresh engineer's ``state_dict`` with
    round 0's record; loaded, then ``on_run_start`` and the round-0 design, it must design what
    an engineer that ran round 0 itself designs."""
    testbed = _testbed(testbed_name)
    fresh = _make(name, tmp_path / "fresh")
    state = json.loads(json.dumps(fresh.state_dict()))
    fresh.close()
    assert _round0_design(name, testbed, tmp_path / "forked", 5, state) == \
        _round0_design(name, testbed, tmp_path / "own", 5)
