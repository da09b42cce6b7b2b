"""The reasoning_gym testbed builds every bucket's items from the library's own level configs."""

from __future__ import annotations

import json

import numpy as np

from curriculum.core.types import Completion
from testbeds.reasoning_gym.testbed import ReasoningGymTestbed, ReasoningGymTestbedConfig, level_config


def test_levels_with_enum_settings_sample_and_score_their_reference_answers():
    # word_sorting's config holds an enum (TextTransformation): it must reach the dataset as one.
    testbed = ReasoningGymTestbed(ReasoningGymTestbedConfig(tasks=["word_sorting", "gcd"], max_levels=2))
    proposal = testbed.initial_proposal(np.random.default_rng(0))
    tasks = testbed.sample(proposal, 8, seed=3)
    assert sorted({t.features["bucket"] for t in tasks}) == sorted(testbed.proposal_space.buckets)
    for task in tasks:
        reward, verdict = testbed.score(task, Completion(text=testbed.reference_answer(task), num_tokens=4))
        assert reward == 1.0 and verdict["valid"], task.features
    assert isinstance(json.loads(level_config("word_sorting", 1))["transformation"], str)  # the readable record


def test_open_ended_items_have_no_reference_answer():
    # level 0 has 4 distinct questions: no room for disjoint suites
    testbed = ReasoningGymTestbed(ReasoningGymTestbedConfig(tasks=["propositional_logic"], max_levels=1, dedup=False))
    task = testbed.sample(testbed.initial_proposal(np.random.default_rng(0)), 1, seed=0)[0]
    assert task.data["answer"] is None and testbed.reference_answer(task) is None
