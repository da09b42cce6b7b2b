"""One suite every registered testbed passes: deterministic sampling, legal projection, state round trip.

It runs on every shipped testbed and on every one an installed package registers through an
entry point (test doubles that other suites register are not plugins)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from curriculum.config import load_config
from curriculum.core.types import Completion
from curriculum.loop import build_testbed
from curriculum.registry import TESTBEDS, shipped


# Settings that give each testbed a non-empty starting proposal to sample from.
NON_EMPTY = {"spade_pool": ["testbed.initial_pool=reasoning_gym", "testbed.reasoning_gym_items=12"]}


def _build(name: str):
    return build_testbed(load_config(None, [f"testbed.name={name}", *NON_EMPTY.get(name, [])]))


TESTBED_NAMES = [t.name for t in TESTBEDS.entries() if t.name in shipped()["testbed"] or t.source != "curriculum"]


@pytest.fixture(params=TESTBED_NAMES)
def testbed(request):
    return _build(request.param)


def test_sampling_is_deterministic(testbed):
    proposal = testbed.initial_proposal(np.random.default_rng(0))
    a = testbed.sample(proposal, 12, seed=3)
    b = testbed.sample(proposal, 12, seed=3)
    assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
    assert a and len({t.id for t in a}) == len(a)
    if testbed.samples_exactly_n:
        assert len(a) == 12


def test_random_proposals_are_fixed_points_of_project(testbed):
    rng = np.random.default_rng(1)
    previous = testbed.initial_proposal(rng)
    for _ in range(5):
        proposal = testbed.random_proposal(rng)
        projected, changes = testbed.project(proposal.model_dump(mode="json"), previous)
        assert projected == proposal and changes == []


@pytest.mark.parametrize("raw", [None, "nonsense", 3, [], {"sizes": "x"}])
def test_unusable_proposals_keep_the_previous_one(testbed, raw):
    previous = testbed.initial_proposal(np.random.default_rng(2))
    projected, changes = testbed.project(raw, previous)
    assert projected == previous
    assert changes, "keeping the previous proposal must be recorded"


def test_score_never_raises_and_state_round_trips(testbed):
    proposal = testbed.initial_proposal(np.random.default_rng(0))
    task = testbed.sample(proposal, 1, seed=0)[0]
    for text in ("", "garbage", "Agent 1: (0,0)", "\x00" * 10):
        reward, verdict = testbed.score(task, Completion(text=text, num_tokens=len(text)))
        assert np.isfinite(reward)
        json.dumps(verdict)
    testbed.observe_training_batch([Completion(text="", num_tokens=10)] * 4)
    state = json.loads(json.dumps(testbed.state_dict()))
    fresh = _build(testbed.name)
    fresh.load_state_dict(state)
    assert fresh.state_dict() == testbed.state_dict()
