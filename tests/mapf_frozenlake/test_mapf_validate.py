"""Parser formats, the eight checks under single mutations, and never-raise fuzzing."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbeds.mapf_frozenlake.config import uniform_config
from testbeds.mapf_frozenlake.generator import generate
from testbeds.mapf_frozenlake.instance import Instance
from testbeds.mapf_frozenlake.parse import format_plan, parse_plan
from testbeds.mapf_frozenlake.validate import CHECKS, validate

_POOL: dict = {}


def pool(agents: int) -> list[Instance]:
    if agents not in _POOL:
        _POOL[agents] = generate(uniform_config(0.25, 0.3), 64, agents=agents, seed=5,
                                 workers=1).instances
    return _POOL[agents]


def failing(inst, paths):
    v = validate(inst, format_plan(paths))
    return {c for c in CHECKS if v.checks[c] is False}, v


# -- parser ------------------------------------------------------------------------------------

EXPECTED = [[(0, 0), (0, 1), (1, 1)], [(2, 1), (2, 1), (1, 1)]]


@pytest.mark.parametrize("text", [
    "Agent 1: (0,0) (0,1) (1,1)\nAgent 2: (2,1) (2,1) (1,1)",
    "agent1: [0, 0] -> [0, 1] -> [1, 1]\nagent2: [2,1], [2,1], [1,1]",
    "A1 = (0,0),(0,1),(1,1)\nA2 = (2,1),(2,1),(1,1)",
    "Robot 1:\n(0,0) (0,1)\n(1,1)\n\nRobot 2:\n(2,1) (2,1) (1,1)",
    "(0,0) (0,1) (1,1)\n(2,1) (2,1) (1,1)",
    '{"agent1": [[0,0],[0,1],[1,1]], "agent2": [[2,1],[2,1],[1,1]]}',
    'Here:\n```json\n[[[0,0],[0,1],[1,1]], [[2,1],[2,1],[1,1]]]\n```',
    '{"paths": [["(0,0)", "(0,1)", "(1,1)"], ["(2,1)", "(2,1)", "(1,1)"]]}',
    "Agent 1: R D\nAgent 2: W U",
    "Agent 1: right down\nAgent 2: wait up",
    "Agent 0: (0,0) (0,1) (1,1)\nAgent 1: (2,1) (2,1) (1,1)",
    "**Agent 1** path: (0,0) (0,1) (1,1)\n**Agent 2** path: (2,1) (2,1) (1,1)",
    "- Agent 1's moves: (0,0) -> (0,1) -> (1,1)\n- Agent 2's moves: (2,1) -> (2,1) -> (1,1)",
    "<think>Maybe Agent 1: (5,5) (5,6)? no.</think>\nAgent 1: (0,0) (0,1) (1,1)\nAgent 2: (2,1) (2,1) (1,1)",
    "Draft:\nAgent 1: (9,9)\nAgent 2: (9,8)\nFinal answer:\nAgent 1: (0,0) (0,1) (1,1)\nAgent 2: (2,1) (2,1) (1,1)",
])
def test_parse_formats(text):
    r = parse_plan(text, 2, [(0, 0), (2, 1)])
    assert r.ok, r.error
    assert r.paths == EXPECTED


def test_parse_later_lines_override_and_failures():
    r = parse_plan("Agent 1: (0,0)\nAgent 2: (1,1)\nAgent 1: (0,0) (0,1)")
    assert r.paths == [[(0, 0), (0, 1)], [(1, 1)]]
    assert not parse_plan("").ok
    assert not parse_plan("I cannot solve this.").ok
    assert not parse_plan("Agent 1: R R").ok          # moves need starts


def test_format_roundtrip():
    for inst in pool(3)[:20]:
        assert parse_plan(format_plan(inst.optimal_plan)).paths == inst.optimal_plan


# -- checks under single mutations -----------------------------------------------------------

def test_stored_plans_pass_all_checks():
    for k in (1, 2, 3):
        for inst in pool(k):
            fails, v = failing(inst, inst.optimal_plan)
            assert not fails and v.valid and v.optimal and v.cost == inst.optimal_cost


def test_unparsable():
    inst = pool(2)[0]
    v = validate(inst, "no plan here")
    assert v.checks["parsable"] is False and not v.valid
    assert all(v.checks[c] is None for c in CHECKS[1:])


def test_agent_count():
    for inst in pool(2):
        assert failing(inst, inst.optimal_plan[:1])[0] == {"agent_count"}


def _free_cell(inst, paths):
    """A cell on the grid that is no hole and that no path ever visits (a resting extra agent there
    conflicts with nobody)."""
    used = {c for p in paths for c in p}
    return next((r, c) for r in range(inst.h) for c in range(inst.w)
                if (r, c) not in inst.holes and (r, c) not in used and (r, c) not in inst.goals)


def _text(lines):
    return "\n".join(" ".join(f"({r},{c})" for r, c in p) for p in lines)


def test_agent_count_fails_for_extra_unlabeled_paths():
    """Three unlabeled paths for two agents state three agents: Agent-count fails, whichever two
    the response might have meant (the parser used to keep the last two)."""
    seen = 0
    for inst in pool(2)[:20]:
        p0, p1 = inst.optimal_plan
        try:
            extra = [_free_cell(inst, [p0, p1])]
        except StopIteration:
            continue
        v = validate(inst, _text([p0, p1, extra]))
        assert {c for c in CHECKS if v.checks[c] is False} == {"agent_count"}, v.reasons
        v = validate(inst, _text([extra, p0, p1]))  # a draft line first: still three agents
        assert not v.valid and v.checks["agent_count"] is False and v.num_paths == 3
        seen += 1
    assert seen > 5


def _labeled(label, path):
    return f"Agent {label}: " + " ".join(f"({r},{c})" for r, c in path)


@pytest.mark.parametrize("layout", ["after", "before", "between", "continued", "prose_around"])
def test_agent_count_fails_for_an_unlabeled_path_beside_labeled_ones(layout):
    """"Agent 1 …, Agent 2 …, (a third path)" on a two-agent instance states three agents: the
    unlabeled line is not dropped, Agent-count fails with the reason, the other checks hold."""
    seen = 0
    for inst in pool(2)[:20]:
        p0, p1 = inst.optimal_plan
        try:
            extra = [_free_cell(inst, [p0, p1])]
        except StopIteration:
            continue
        a, b, x = _labeled(1, p0), _labeled(2, p1), _text([extra])
        text = {"after": f"{a}\n{b}\n{x}", "before": f"{x}\n{a}\n{b}", "between": f"{a}\n{x}\n{b}",
                "continued": f"Agent 1:\n{_text([p0])}\n\n{b}\n{x}",
                "prose_around": f"Here is my plan.\n{a}\n{b}\n{x}\nDone."}[layout]
        v = validate(inst, text)
        assert {c for c in CHECKS if v.checks[c] is False} == {"agent_count"}, (text, v.reasons)
        assert "unlabeled" in v.reasons["agent_count"], v.reasons
        # the same answer without the extra line is valid: the line alone makes the difference
        assert validate(inst, text.replace(x, "").replace("\n\n\n", "\n\n")).valid
        seen += 1
    assert seen > 5


@pytest.mark.parametrize("form", ["canonical", "bracketed", "continued", "moves"])
def test_agent_count_fails_for_a_repeated_label(form):
    """A label that carries a path twice states that agent twice (the parser used to keep the
    last line), even when both lines are the same correct path."""
    for inst in pool(2)[:10]:
        p0, p1 = inst.optimal_plan
        line = {"canonical": _labeled(1, p0),
                "bracketed": "Agent 1: " + " -> ".join(f"[{r},{c}]" for r, c in p0),
                "continued": f"Agent 1:\n{_text([p0])}\n",
                "moves": "Agent 1: " + " ".join(_move_letters(p0))}[form]
        text = f"{line}\n{_labeled(1, p0)}\n{_labeled(2, p1)}"
        v = validate(inst, text)
        assert v.checks["agent_count"] is False, text
        assert "agent 1 labeled with a path more than once" in v.reasons["agent_count"]
        assert validate(inst, f"{_labeled(1, p0)}\n{_labeled(2, p1)}").valid
    # a label line with no path (prose) followed by the path is not a repeat
    inst = pool(2)[0]
    p0, p1 = inst.optimal_plan
    assert validate(inst, f"Agent 1: heads right first\n{_labeled(1, p0)}\n{_labeled(2, p1)}").valid


def _move_letters(path):
    letters = {(-1, 0): "U", (1, 0): "D", (0, -1): "L", (0, 1): "R", (0, 0): "W"}
    return [letters[(b[0] - a[0], b[1] - a[1])] for a, b in zip(path, path[1:])] or ["W"]


@pytest.mark.parametrize("labels", [(1, 3), (0, 2), (2, 3), (3, 1)])
def test_agent_count_fails_for_labels_naming_other_agents(labels):
    """``Agent 1`` / ``Agent 3`` for a two-agent instance names agents 1 and 3: never renumbered."""
    for inst in pool(2)[:10]:
        paths = inst.optimal_plan
        order = sorted(range(2), key=lambda i: labels[i])
        text = "\n".join(f"Agent {labels[i]}: " + " ".join(f"({r},{c})" for r, c in paths[i]) for i in order)
        v = validate(inst, text)
        assert not v.valid and v.checks["agent_count"] is False, text
        assert "names agents" in v.reasons["agent_count"] or "paths for" in v.reasons["agent_count"]
    inst = pool(2)[0]
    p0, p1 = inst.optimal_plan
    as_json = json.dumps({f"agent{labels[0]}": p0, f"agent{labels[1]}": p1})
    assert validate(inst, as_json).checks["agent_count"] is False


def test_agent_count_holds_for_both_label_bases():
    for inst in pool(2)[:10]:
        for base in (0, 1):
            text = "\n".join(f"Agent {i + base}: " + " ".join(f"({r},{c})" for r, c in p)
                             for i, p in enumerate(inst.optimal_plan))
            assert validate(inst, text).valid


def test_agent_count_fails_for_moves_of_an_agent_without_a_start():
    inst = Instance(1, 3, frozenset(), [(0, 0), (0, 2)], [(0, 1), (0, 2)], optimal_cost=1)
    assert validate(inst, "Agent 1: R\nAgent 2: W").valid
    v = validate(inst, "Agent 1: R\nAgent 3: W")
    assert {c for c in CHECKS if v.checks[c] is False} == {"agent_count"}


def test_start_goal_jump():
    for inst in pool(1):
        p = inst.optimal_plan[0]
        assert failing(inst, [[p[1]] + p])[0] == {"start_correct"}
        assert failing(inst, [p[:-1]])[0] == {"goal_reached"}
        if len(p) >= 3:
            assert failing(inst, [p[:1] + p[2:]])[0] == {"legal_move"}


def _detours(inst, p, pred):
    for t, (r, c) in enumerate(p):
        for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            x = (r + dr, c + dc)
            if pred(x):
                return p[:t + 1] + [x] + p[t:]
    return None


def test_hole_and_bounds():
    seen_hole = seen_oob = 0
    for inst in pool(1):
        p = inst.optimal_plan[0]
        q = _detours(inst, p, lambda x: x in inst.holes)
        if q is not None:
            assert failing(inst, [q])[0] == {"hole_free"}
            seen_hole += 1
        q = _detours(inst, p, lambda x: not (0 <= x[0] < inst.h and 0 <= x[1] < inst.w))
        if q is not None:
            assert failing(inst, [q])[0] == {"in_bounds"}
            seen_oob += 1
    assert seen_hole > 5 and seen_oob > 5


def test_conflicts():
    seen = 0
    for inst in pool(2):
        p0, p1 = inst.optimal_plan
        for d in range(1, 8):
            fails, v = failing(inst, [[p0[0]] * d + p0, p1])
            if fails:
                assert fails == {"conflict_free"}, v.reasons
                seen += 1
                break
    assert seen > 5
    swap = Instance(1, 2, frozenset(), [(0, 0), (0, 1)], [(0, 1), (0, 0)])
    fails, v = failing(swap, [[(0, 0), (0, 1)], [(0, 1), (0, 0)]])
    assert fails == {"conflict_free"} and "swap" in v.reasons["conflict_free"]
    # resting on the goal still occupies it
    rest = Instance(1, 3, frozenset(), [(0, 0), (0, 2)], [(0, 1), (0, 0)])
    fails, _ = failing(rest, [[(0, 0), (0, 1)], [(0, 2), (0, 1), (0, 0)]])
    assert fails == {"conflict_free"}


def test_cost_and_optimal_flag():
    inst = Instance(1, 3, frozenset(), [(0, 0)], [(0, 2)], optimal_cost=2)
    v = validate(inst, "Agent 1: (0,0) (0,0) (0,1) (0,2) (0,2)")
    assert v.valid and v.cost == 3 and not v.optimal
    v = validate(inst, "Agent 1: (0,0) (0,1) (0,2)")
    assert v.valid and v.cost == 2 and v.optimal


# -- fuzz ----------------------------------------------------------------------------------------

tokens = st.sampled_from(["Agent", "agent 1", "A2", ":", "(", ")", "[", "]", ",", "-1", "0", "1",
                          "2", "99999", " ", "\n", "->", "</think>", "<think>", "```", "{", "}",
                          '"', "final answer", "R", "U", "wait", "paths", "null", "1e9"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=300), st.lists(tokens, max_size=80).map("".join)))
def test_parse_and_validate_never_raise(text):
    inst = pool(2)[0]
    r = parse_plan(text, 2, inst.starts)
    assert isinstance(r.ok, bool)
    v = validate(inst, text)
    assert set(v.checks) == set(CHECKS)
    json.dumps(v.to_dict())


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.none() | st.integers(-3, 12) | st.text(max_size=4),
                    lambda c: st.lists(c, max_size=5) | st.dictionaries(st.text(max_size=6), c, max_size=4),
                    max_leaves=30))
def test_validate_never_raises_on_json(obj):
    inst = pool(2)[1]
    validate(inst, json.dumps(obj))
    validate(inst, obj if isinstance(obj, list) else [obj])


def test_echoed_prompt_then_answer():
    from testbeds.mapf_frozenlake.prompts import render_user

    for inst in pool(3)[:10]:
        text = render_user(inst) + "\n\nSure.\n" + format_plan(inst.optimal_plan)
        v = validate(inst, text)
        assert v.valid and v.optimal, v.reasons


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12),
                          st.lists(st.tuples(st.integers(0, 120), st.integers(0, 120)),
                                   min_size=1, max_size=6)), min_size=1, max_size=5),
       st.sampled_from([" ", "", "  "]), st.sampled_from(["\n", "\n\n", " \n"]))
def test_canonical_fast_path_agrees_with_general_parser(lines, sep, nl):
    from testbeds.mapf_frozenlake import parse as P

    text = nl.join(f"Agent {lab}: " + sep.join(f"({r},{c})" for r, c in cells)
                   for lab, cells in lines)
    fast = P._parse_canonical(text)
    if fast is None:   # the fast path only takes exact single-space canonical text
        assert sep == "  "
        return
    slow = None
    for seg in P._segments(text):
        slow = P._parse_json(seg, None) or P._parse_lines(seg, None)
        if slow is not None and slow.ok:
            break
    assert slow is not None and fast.paths == slow.paths and fast.agents == slow.agents
