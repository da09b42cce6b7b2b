"""The SPADE testbed's held-out reasoning-gym items for comparisons: each item's outcome kept by its
content (``EvalReport.task_scores``), so runs pair item by item at the level of seeds even where one
run's suite leaves out a question it trains on; and the fixed reasoning-gym environment set at a
declared level (``reasoning_gym_train_levels``), whose questions the eval leaves out too."""

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
    import testbeds.spade.heldout.reasoning as reasoning
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


def test_the_fixed_reasoning_gym_set_at_a_declared_level_and_the_eval_leaves_its_questions_out():
    pytest.importorskip("reasoning_gym")
    from testbeds.spade.heldout.reasoning import training_environments, training_questions
    from testbeds.spade.testbed import SpadeTestbed, load_initial_pool

    levelled = training_environments(["basic_arithmetic"], 20, levels={"basic_arithmetic": LEVEL})
    default = training_environments(["basic_arithmetic"], 20)
    assert levelled[0].hash.startswith("rg-basic_arithmetic-10000000-") and default[0].hash == "rg-basic_arithmetic-10000000"
    questions = training_questions(["basic_arithmetic"], 20, levels={"basic_arithmetic": LEVEL})
    assert questions != training_questions(["basic_arithmetic"], 20)
    for q in questions:  # two one-digit terms, as the level says
        numbers = [int(n) for n in re.findall(r"\d+", q)]
        assert len(numbers) == 2 and max(numbers) <= 10, q  # reasoning-gym draws a one-digit term up to 10
    cfg = _config(initial_pool="reasoning_gym", reasoning_gym_train=["basic_arithmetic"], reasoning_gym_items=20,
                  reasoning_gym_train_levels={"basic_arithmetic": LEVEL})
    assert [e.hash for e in load_initial_pool("reasoning_gym", cfg)] == [levelled[0].hash]
    asked = Oracle({})
    SpadeTestbed(cfg).evaluate(asked)
    assert len(asked.asked) == 12 and not questions & set(asked.asked)
    with pytest.raises(ValueError, match="reasoning_gym_train_levels names datasets not in reasoning_gym_train: gcd"):
        _config(reasoning_gym_train=["basic_arithmetic"], reasoning_gym_train_levels={"gcd": {"max_value": 9}})
