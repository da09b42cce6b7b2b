"""Held-out suites: the tool tasks are solvable and not trivially won; reasoning-gym items are
fixed and scored by their datasets; the pool testbed round-trips proposals into tasks."""

import json

import pytest

from curriculum.core.types import Completion
from testbeds.spade.heldout.tools import TOOL_TASKS, ToolSuiteEval
from testbeds.spade.heldout.tools import evaluate as tools_evaluate


@pytest.fixture(scope="module")
def tool_pool():
    from testbeds.spade.sandbox import SandboxConfig, SandboxPool
    from testbeds.spade.synthetic import prelude_source

    pool = SandboxPool(SandboxConfig(workers=2, prelude_source=prelude_source()))
    pool.start()
    yield pool
    pool.close()


@pytest.mark.parametrize("name", sorted(TOOL_TASKS))
def test_tool_task_solution_wins_and_guess_loses(tool_pool, name):
    for seed in (30_260_000, 30_260_001):
        with tool_pool.load(TOOL_TASKS[name]) as env:
            env.reset(seed=seed)
            actions = env.call("solution")
            for action in actions:
                step = env.step(json.dumps(action))
            assert step.terminated and step.reward == 1.0, (name, seed, step.obs)
        with tool_pool.load(TOOL_TASKS[name]) as env:
            env.reset(seed=seed)
            step = env.step("\\boxed{7}")
            assert step.terminated and step.reward == 0.0


class OraclePolicy:
    """Plays each tool task's solution (learned from a side channel: the sandbox), for the eval loop."""

    def __init__(self, pool):
        self.pool = pool
        self.plans = {}

    def generate(self, tasks, *, max_new_tokens=None, temperature=None, seed=0):
        out = []
        for task in tasks:
            key = task.id.rsplit("-", 1)[0]
            if key not in self.plans:
                _, tname, tseed = key.split("-", 2)
                with self.pool.load(TOOL_TASKS[tname]) as env:
                    env.reset(seed=int(tseed))
                    self.plans[key] = [json.dumps(a) for a in env.call("solution")]
            turn = sum(1 for m in task.messages if m["role"] == "assistant")
            out.append(Completion(text=self.plans[key][turn], num_tokens=1))
        return out


class SilentPolicy:
    def generate(self, tasks, **_):
        return [Completion(text="I do not know.", num_tokens=4) for _ in tasks]


def test_tool_suite_eval(tool_pool):
    cfg = ToolSuiteEval(tasks=["bank_transfer", "calendar_book"], episodes_per_task=2)
    metrics, _, _ = tools_evaluate(OraclePolicy(tool_pool), cfg, tool_pool)
    assert metrics["tools/mean"] == 1.0 and metrics["tools/calls_when_solved"] == 2.0
    metrics, _, _ = tools_evaluate(SilentPolicy(), cfg, tool_pool)
    assert metrics["tools/mean"] == 0.0


def test_reasoning_gym_items_fixed_and_scored():
    pytest.importorskip("reasoning_gym")
    from testbeds.spade.heldout.reasoning import ReasoningGymEval, build_items
    from testbeds.spade.heldout.reasoning import evaluate_items

    cfg = ReasoningGymEval(datasets={"maths": ["basic_arithmetic"], "algorithmic": ["spell_backward"]},
                           per_dataset=3)
    a = build_items(cfg.datasets, 3, cfg.eval_seed)
    b = build_items(cfg.datasets, 3, cfg.eval_seed)
    assert [x["question"] for x in a] == [x["question"] for x in b]
    answers = {x["question"] + "\n\nPut your final answer inside \\boxed{}.": x["answer"] for x in a}

    class Oracle:
        def generate(self, tasks, **_):
            return [Completion(text=f"so \\boxed{{{answers[t.messages[0]['content']]}}}", num_tokens=3) for t in tasks]

    metrics, breakdown, _, _ = evaluate_items(Oracle(), cfg)
    assert metrics["reasoning_gym/maths"] == 1.0 and metrics["reasoning_gym/algorithmic"] == 1.0
    metrics, _, _, _ = evaluate_items(SilentPolicy(), cfg)
    assert metrics["reasoning_gym/mean"] == 0.0


def test_fixed_reasoning_gym_environments_disjoint_from_eval(tool_pool):
    pytest.importorskip("reasoning_gym")
    from testbeds.spade.heldout.reasoning import build_items, training_environments

    envs = training_environments(["spell_backward"], 5)
    eval_questions = {x["question"] for x in build_items({"a": ["spell_backward"]}, 50, 20_260_000)}
    with tool_pool.load(envs[0].program) as env:
        first = env.reset(seed=2)
        answer = env.call("solution")
        assert first.obs.split("\n\n")[0] not in eval_questions
        assert env.step(f"\\boxed{{{answer}}}").reward == 1.0


def test_pool_testbed_round_trip():
    from curriculum.core.pool import pool_item
    from testbeds.spade.testbed import SpadeProposal, SpadeTestbed, SpadeTestbedConfig

    tb = SpadeTestbed(SpadeTestbedConfig())
    raw = {"environments": [{"hash": "h1", "setting": "games", "skill": "logic", "hint": "x", "program": "class AEnv: pass"},
                            {"bad": 1}],
           "designs": [{"design_id": "r1-c0", "skill": "logic", "messages": [{"role": "user", "content": "d"}],
                        "completion": "out", "admitted": True, "env_id": "h1"}]}
    proposal, changes = tb.project(raw, SpadeProposal())
    assert len(proposal.environments) == 1 and len(changes) == 1
    tasks = tb.sample(proposal, 0, 0)
    assert [t.data["kind"] for t in tasks] == ["env", "design"]
    env, design = map(pool_item, tasks)
    assert env == proposal.environments[0] and env.program == "class AEnv: pass"
    assert design.design_id == "r1-c0" and design == proposal.designs[0]


def test_pool_testbed_keeps_previous_on_unusable_raw():
    from testbeds.spade.testbed import SpadeProposal, SpadeTestbed, SpadeTestbedConfig

    tb = SpadeTestbed(SpadeTestbedConfig())
    previous = SpadeProposal(environments=[{"hash": "h", "program": "x"}])
    for raw in (None, "nonsense", 3, [], {"sizes": "x"}):
        projected, changes = tb.project(raw, previous)
        assert projected == previous and changes
    reward, verdict = tb.score(tb.sample(previous, 1, 0)[0], Completion(text="", num_tokens=0))
    assert reward == 0.0 and not verdict["valid"]


def test_reasoning_gym_levels_set_each_datasets_difficulty():
    pytest.importorskip("reasoning_gym")
    import re

    from testbeds.spade.heldout.reasoning import ReasoningGymEval, build_items

    easy = {"min_terms": 2, "max_terms": 2, "max_digits": 1, "operators": ["+"], "allow_parentheses": False,
            "allow_negation": False}
    items = build_items({"maths": ["basic_arithmetic"]}, 8, 20_260_000, levels={"basic_arithmetic": easy})
    for item in items:
        numbers = [int(n) for n in re.findall(r"\d+", item["question"])]
        assert len(numbers) == 2 and max(numbers) <= 9, item["question"]
    default = build_items({"maths": ["basic_arithmetic"]}, 8, 20_260_000)
    assert [x["question"] for x in default] != [x["question"] for x in items]
    with pytest.raises(ValueError, match="levels names datasets the eval does not use: gcd"):
        ReasoningGymEval(datasets={"maths": ["basic_arithmetic"]}, levels={"gcd": {"max_value": 9}})
    with pytest.raises(ValueError, match="basic_arithmetic"):
        build_items({"maths": ["basic_arithmetic"]}, 2, 0, levels={"basic_arithmetic": {"no_such_knob": 1}})


def test_reasoning_gym_items_distinct_and_never_a_training_question():
    pytest.importorskip("reasoning_gym")
    from testbeds.spade.heldout.reasoning import build_items

    level = {"min_terms": 2, "max_terms": 2, "max_digits": 1, "operators": ["+"], "allow_parentheses": False,
             "allow_negation": False}
    first = build_items({"m": ["basic_arithmetic"]}, 10, 5, levels={"basic_arithmetic": level})
    questions = [x["question"] for x in first]
    assert len(set(questions)) == 10
    excluded = frozenset(questions[:4])
    again = build_items({"m": ["basic_arithmetic"]}, 10, 5, levels={"basic_arithmetic": level}, exclude=excluded)
    assert len({x["question"] for x in again}) == 10 and not excluded & {x["question"] for x in again}
    # a level with fewer distinct questions than asked for is refused, not silently short
    tiny = {**level, "operators": ["+"], "max_digits": 1}
    with pytest.raises(ValueError, match="distinct held-out questions"):
        build_items({"m": ["basic_arithmetic"]}, 200, 5, levels={"basic_arithmetic": tiny})


def test_spade_testbed_eval_excludes_its_training_questions(monkeypatch):
    pytest.importorskip("reasoning_gym")
    import testbeds.spade.heldout.reasoning as reasoning
    from testbeds.spade.testbed import SpadeTestbed, SpadeTestbedConfig

    level = {"min_terms": 2, "max_terms": 2, "max_digits": 1, "operators": ["+"], "allow_parentheses": False,
             "allow_negation": False}
    cfg = SpadeTestbedConfig(setting="games", initial_pool="reasoning_gym", reasoning_gym_train=["basic_arithmetic"],
                             reasoning_gym_items=40,
                             reasoning_gym={"datasets": {"maths": ["basic_arithmetic"]}, "per_dataset": 12,
                                            "levels": {"basic_arithmetic": level}, "max_new_tokens": 8})
    plain = [x["question"] for x in reasoning.build_items(cfg.reasoning_gym.datasets, 12, cfg.reasoning_gym.eval_seed,
                                                          levels=cfg.reasoning_gym.levels)]
    # as if the fixed training set asked three of the eval's questions
    seen_args = []

    def trained(datasets, items, *rest, levels=None):
        seen_args.append((list(datasets), items))
        return frozenset(plain[:3])

    monkeypatch.setattr(reasoning, "training_questions", trained)
    asked: list[str] = []

    class Recorder:
        def generate(self, tasks, **_):
            asked.extend(t.messages[0]["content"].split("\n\n")[0] for t in tasks)
            return [Completion(text="\\boxed{0}", num_tokens=1) for _ in tasks]

    SpadeTestbed(cfg).evaluate(Recorder())
    assert seen_args == [(["basic_arithmetic"], 40)]
    assert len(asked) == 12 and not set(plain[:3]) & set(asked) and asked[:9] == plain[3:]


def test_reasoning_gym_level_its_generator_cannot_draw_from_is_refused(monkeypatch):
    pytest.importorskip("reasoning_gym")
    import testbeds.spade.heldout.reasoning as reasoning

    monkeypatch.setattr(reasoning, "GENERATION_DEADLINE_S", 0.5)
    # reasoning-gym redraws the target base until it differs from the source base: forever here
    with pytest.raises(ValueError, match="drew no question in 0.5 s"):
        reasoning.build_items({"a": ["base_conversion"]}, 2, 0,
                              levels={"base_conversion": {"min_base": 2, "max_base": 2}})
