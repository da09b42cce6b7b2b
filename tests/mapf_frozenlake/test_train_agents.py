"""``testbed.train_agents`` as a list: every round's instances split equally over agent counts."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from pydantic import ValidationError

from testbeds.mapf_frozenlake.generator import SizeReport, merge_reports
from testbeds.mapf_frozenlake.testbed import MAPFTestbed, MAPFTestbedConfig


def _sample(train_agents, n: int, seed: int):
    testbed = MAPFTestbed(MAPFTestbedConfig(train_agents=train_agents))
    proposal = testbed.initial_proposal(np.random.default_rng(0))
    return testbed, testbed.sample(proposal, n, seed)


def test_a_list_splits_the_round_equally_and_interleaves_the_counts():
    testbed, tasks = _sample([2, 3], 9, seed=5)
    counts = Counter(t.features["agents"] for t in tasks)
    assert counts == {2: 5, 3: 4}
    assert [t.features["agents"] for t in tasks] != sorted(t.features["agents"] for t in tasks)
    assert sum(r["n"] for r in testbed.last_generation_report.values()) == 9
    assert all(len(t.data["starts"]) == t.features["agents"] for t in tasks)


def test_a_list_is_deterministic_in_the_seed():
    _, first = _sample([2, 3], 6, seed=1)
    _, again = _sample([2, 3], 6, seed=1)
    _, other = _sample([2, 3], 6, seed=2)
    assert [t.id for t in first] == [t.id for t in again]
    assert [t.messages for t in first] != [t.messages for t in other]


def test_an_int_keeps_one_agent_count():
    _, tasks = _sample(2, 4, seed=0)
    assert {t.features["agents"] for t in tasks} == {2}


@pytest.mark.parametrize("bad", [[], [2, 9], 0, [0]])
def test_bad_agent_counts_are_refused(bad):
    with pytest.raises(ValidationError):
        MAPFTestbedConfig(train_agents=bad)


def test_merged_reports_add_counts_and_weight_ratios():
    a = {"3x3": SizeReport(n_requested=2, n=2, hole_ratio_requested=0.2, hole_ratio_achieved=0.1,
                           wait_ratio_requested=None, wait_ratio_achieved=0.0, warnings=["x"])}
    b = {"3x3": SizeReport(n_requested=2, n=1, hole_ratio_requested=0.2, hole_ratio_achieved=0.4,
                           wait_ratio_requested=None, wait_ratio_achieved=0.3),
         "4x4": SizeReport(n_requested=1, n=1, hole_ratio_requested=0.2, hole_ratio_achieved=0.2,
                           wait_ratio_requested=None, wait_ratio_achieved=0.0)}
    merged = merge_reports([a, b])
    assert merged["3x3"].n_requested == 4 and merged["3x3"].n == 3
    assert merged["3x3"].hole_ratio_achieved == pytest.approx(0.2)
    assert merged["3x3"].wait_ratio_achieved == pytest.approx(0.1)
    assert merged["3x3"].warnings == ["x"] and merged["4x4"].n == 1
    assert a["3x3"].warnings == ["x"]  # the inputs are not modified
