"""Every registered testbed's held-out suites: validation and test are disjoint by content, and
training never draws a held-out task (a planted duplicate is redrawn). A testbed with one
held-out suite declares it and refuses the other."""

from __future__ import annotations

import numpy as np
import pytest

from curriculum.config import load_config
from curriculum.loop import build_testbed
from curriculum.registry import shipped

SMALL = {"mapf_frozenlake": ["testbed.eval_agents=[2]", "testbed.eval_instances_per_size=2",
                             "testbed.eval_sizes=[3x3,4x4]"],
         "reasoning_gym": ["testbed.eval_per_bucket=2"],
         "spade_pool": ["testbed.initial_pool=reasoning_gym", "testbed.reasoning_gym_items=12"]}


def _build(name: str):
    return build_testbed(load_config(None, [f"testbed.name={name}", *SMALL.get(name, [])]))


@pytest.fixture(params=shipped()["testbed"])
def testbed(request):
    return _build(request.param)


def test_suites_are_declared(testbed):
    assert testbed.eval_suites in (("validation", "test"), ("validation",)), \
        "a testbed has a validation and a test suite, or declares its single held-out suite"
    if "test" not in testbed.eval_suites:
        with pytest.raises(ValueError, match="no 'test' suite"):
            testbed.check_suite("test")


def test_validation_and_test_are_disjoint_by_content(testbed):
    if "test" not in testbed.eval_suites:
        pytest.skip(f"{testbed.name} has one held-out suite")
    val = {testbed.canonical(t) for t in testbed.eval_tasks("validation")}
    test = [testbed.canonical(t) for t in testbed.eval_tasks("test")]
    assert val and test and not val & set(test)
    assert testbed.held_out_keys() == val | set(test)


def test_training_draws_avoid_the_held_out_suites_even_a_planted_duplicate(testbed, monkeypatch):
    if "test" not in testbed.eval_suites:
        pytest.skip(f"{testbed.name} has one held-out suite")
    proposal = testbed.initial_proposal(np.random.default_rng(0))
    before = testbed.sample(proposal, 16, seed=4)
    held = testbed.held_out_keys()
    assert not {testbed.canonical(t) for t in before} & held
    planted = testbed.canonical(before[5])
    monkeypatch.setattr(testbed, "held_out_keys", lambda: held | {planted})
    after = testbed.sample(proposal, 16, seed=4)
    assert len(after) == 16 and planted not in {testbed.canonical(t) for t in after}
    assert sum(a.id != b.id for a, b in zip(sorted(before, key=lambda t: t.id),
                                            sorted(after, key=lambda t: t.id))) >= 1
