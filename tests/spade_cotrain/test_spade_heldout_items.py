"""The SPADE testbed's held-out reasoning-gym items for comparisons: each item's outcome kept by its
content (``EvalReport.task_scores``), so runs pair item by item at the level of seeds even where one
run's suite leaves out a question it trains on."""

from __future__ import annotations

import re

import pytest

from curriculum.core.types import Completion

LEVEL = {"min_terms": 2, "max_terms": 2, "max_digits": 1, "operators": ["+"], "allow_parentheses": False,
         "allow_negation": False}


def _config(**changes):
    from testbeds.spade.testbed import SpadeTestbedConfig

    data = {"setting": "games", "reasoning_gym_items": 40,
            "reasoning_gym": {"datasets": {"maths": ["basic_arithmetic"]}, "per_dataset": 12,
                              "levels": {"basic_arithmetic": LEVEL}, "max_new_tokens": 8}}
    return SpadeTestbedConfig(**(data | changes))


class Oracle:
    """Answers every item right (the answers of the suite's questions, by question)."""

    def __init__(self, answers):
        self.answers, self.asked = answers, []

    def generate(self, tasks, **_):
        questions = [t.messages[0]["content"].split("\n\n")[0] for t in tasks]
        self.asked.extend(questions)
        return [Completion(text=f"\\boxed{{{self.answers.get(q, 'x')}}}", num_tokens=1) for q in questions]


def test_each_items_outcome_is_kept_by_its_content_and_pairs_across_suites(monkeypatch):
    pytest.importorskip("reasoning_gym")
    import testbeds.heldout.reasoning as reasoning
    from testbeds.spade.testbed import SpadeTestbed

    cfg = _config()
    items = reasoning.build_items(cfg.reasoning_gym.datasets, 40, cfg.reasoning_gym.eval_seed, levels=cfg.reasoning_gym.levels)
    answers = {it["question"]: it["answer"] for it in items}
    plain = SpadeTestbed(cfg).evaluate(Oracle(answers))
    assert len(plain.task_scores) == 12 and set(plain.task_scores.values()) == {1.0}
    assert all(re.fullmatch(r"basic_arithmetic/[0-9a-f]{12}", key) for key in plain.task_scores)
    assert plain.score == 1.0
    # a run that trains on three of those questions is asked three others in their place
    first = [it["question"] for it in items[:12]]
    monkeypatch.setattr(reasoning, "training_questions", lambda *a, **k: frozenset(first[:3]))
    other = SpadeTestbed(_config(initial_pool="reasoning_gym", reasoning_gym_train=["basic_arithmetic"])).evaluate(
        Oracle(answers))
    shared = set(plain.task_scores) & set(other.task_scores)
    assert len(other.task_scores) == 12 and len(shared) == 9
    assert shared == {reasoning.item_key({"dataset": "basic_arithmetic", "question": q}) for q in first[3:]}

