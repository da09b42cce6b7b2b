"""Validation and test suites of MAPF-FrozenLake: disjoint by content, and training and warm-start
draws never repeat a held-out instance (checked with planted duplicates)."""

from __future__ import annotations

import numpy as np
import pytest

from testbeds.mapf_frozenlake.instance import Instance
from testbeds.mapf_frozenlake.suites import build_suite, content_key
from testbeds.mapf_frozenlake.testbed import MAPFTestbed, MAPFTestbedConfig

SMALL = dict(eval_agents=[2], eval_instances_per_size=3, eval_sizes=["3x3", "4x4"], warmstart_sizes=["3x3"])


def _testbed(**kw) -> MAPFTestbed:
    return MAPFTestbed(MAPFTestbedConfig(**{**SMALL, **kw}))


def _keys(instances) -> list[str]:
    return [content_key(i) for i in instances]


def test_content_key_ignores_ids_and_solutions_but_not_the_map():
    inst = build_suite(2, 1, 7, sizes=["3x3"], use_cache=False)[0]
    copy = type(inst).from_dict({**inst.to_dict(), "id": "other", "optimal_plan": None, "optimal_cost": None})
    assert content_key(copy) == content_key(inst)
    swapped = type(inst).from_dict({**inst.to_dict(with_solution=False), "starts": inst.goals, "goals": inst.starts})
    assert content_key(swapped) != content_key(inst)


def test_validation_and_test_suites_are_disjoint_and_labelled():
    tb = _testbed()
    val, test = tb.eval_instances("validation"), tb.eval_instances("test")
    assert len(val) == len(test) == 2 * 3
    assert not set(_keys(val)) & set(_keys(test))
    assert all(i.id.startswith("eval-") for i in val) and all(i.id.startswith("test-") for i in test)
    # The validation suite is the eval suite runs always had (same seed, same instances).
    assert _keys(val) == _keys(build_suite(2, 3, 1234, sizes=["3x3", "4x4"]))
    assert tb.held_out_keys() == frozenset(_keys(val) + _keys(test))
    with pytest.raises(ValueError, match="no 'train' suite"):
        tb.eval_instances("train")


def test_a_planted_duplicate_is_left_out_of_a_suite():
    plain = build_suite(2, 3, 99, sizes=["3x3"], use_cache=False)
    planted = content_key(plain[1])
    excluded = build_suite(2, 3, 99, sizes=["3x3"], use_cache=False, exclude={planted})
    assert planted not in _keys(excluded) and len(excluded) == 3
    # The others stay, in order, and the next draw of the same seed fills the gap.
    assert _keys(excluded)[:2] == [content_key(plain[0]), content_key(plain[2])]
    assert _keys(excluded)[2] == content_key(build_suite(2, 4, 99, sizes=["3x3"], use_cache=False)[3])


def test_test_seed_must_differ_from_the_validation_seed():
    with pytest.raises(ValueError, match="own seed"):
        MAPFTestbedConfig(eval_seed=5, test_seed=5)


def _plant(tb: MAPFTestbed, suite: str, instance) -> None:
    """Put ``instance`` into a held-out suite (in memory) as if its generator had drawn it."""
    tb.eval_instances(suite).append(instance)
    tb._held_out = None


@pytest.mark.parametrize("suite", ["validation", "test"])
@pytest.mark.parametrize("train_agents", [2, [2, 3]])
def test_training_draws_replace_a_planted_held_out_duplicate(suite, train_agents):
    """``sample`` redraws an instance whose content is held out (removing the dedup fails this)."""
    proposal = MAPFTestbed(MAPFTestbedConfig(**SMALL)).initial_proposal(np.random.default_rng(0))
    before = _testbed(train_agents=train_agents).sample(proposal, 24, seed=5)
    tb = _testbed(train_agents=train_agents)
    victim = before[7]

    _plant(tb, suite, Instance.from_dict(victim.data))
    after = tb.sample(proposal, 24, seed=5)
    assert len(after) == 24 and len({t.id for t in after}) == 24
    keys = [tb.canonical(t) for t in after]
    assert tb.canonical(victim) not in keys
    assert not set(keys) & tb.held_out_keys()
    # Only the duplicate changed, into a draw of the same size; the rest is untouched.
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a.id != b.id]
    assert changed == [7] and after[7].features["size"] == victim.features["size"]
    assert [t.model_dump() for t in tb.sample(proposal, 24, seed=5)] == [t.model_dump() for t in after]


def test_warm_start_draws_replace_a_planted_held_out_duplicate():
    before = _testbed().warmstart_tasks(12, seed=3)
    tb = _testbed()
    _plant(tb, "test", Instance.from_dict(before[4].data))
    after = tb.warmstart_tasks(12, seed=3)
    assert tb.canonical(before[4]) not in {tb.canonical(t) for t in after}
    assert sum(a.id != b.id for a, b in zip(before, after)) == 1 and len(after) == 12


def test_eval_reports_name_their_suite():
    from tests.mapf_frozenlake.test_mapf_testbed import OraclePolicy

    tb = _testbed()
    val, test = tb.evaluate(OraclePolicy(), suite="validation"), tb.evaluate(OraclePolicy(), suite="test")
    assert (val.suite, test.suite) == ("validation", "test")
    assert all(k.startswith("eval-") for k in val.task_scores)
    assert all(k.startswith("test-") for k in test.task_scores)


def test_a_wait_target_suite_holds_only_instances_that_need_a_wait():
    """``eval_wait_ratio: 1``: every held-out instance needs a wait (the hard target of a curriculum
    benchmark); the default natural-mix suites keep their instances and cache keys."""
    tb = _testbed(eval_wait_ratio=1.0, eval_sizes=["4x4", "5x5"])
    for suite in ("validation", "test"):
        assert all(i.needs_wait for i in tb.eval_instances(suite))
    natural = _testbed(eval_sizes=["4x4", "5x5"]).eval_instances("validation")
    assert not all(i.needs_wait for i in natural)
    assert _keys(natural) == _keys(build_suite(2, 3, 1234, sizes=["4x4", "5x5"]))
