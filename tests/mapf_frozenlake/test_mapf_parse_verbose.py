"""The parser on answers as verbose models write them: property tests over every supported layout
with prose around the plan, and a held-back set of hand-written answers with the verdict the
eight checks give each."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbeds.mapf_frozenlake.config import uniform_config
from testbeds.mapf_frozenlake.generator import generate
from testbeds.mapf_frozenlake.instance import Instance
from testbeds.mapf_frozenlake.parse import parse_plan
from testbeds.mapf_frozenlake.validate import CHECKS, validate

_POOL: dict = {}


def pool(agents: int) -> list[Instance]:
    if agents not in _POOL:
        _POOL[agents] = generate(uniform_config(0.25, 0.3), 24, agents=agents, seed=11,
                                 workers=1).instances
    return _POOL[agents]


# -- layouts: (paths, cell writer) -> answer text ---------------------------------------------

def _cells(path, cell, i, sep=" "):
    return sep.join(cell(i, t, c) for t, c in enumerate(path))


def _lines(label, sep=" "):
    return lambda paths, cell: "\n".join(f"{label.format(i=i + 1)} {_cells(p, cell, i, sep)}"
                                         for i, p in enumerate(paths))


def _annotated(paths, cell):
    return "\n".join(f"Agent {i + 1} (start ({p[0][0]},{p[0][1]}), goal ({p[-1][0]},{p[-1][1]})): "
                     + _cells(p, cell, i) for i, p in enumerate(paths))


def _colon_annotated(paths, cell):
    return "\n".join(f"- **Agent {i + 1}**: start ({p[0][0]},{p[0][1]}), goal ({p[-1][0]},{p[-1][1]}): "
                     + _cells(p, cell, i, " → ") for i, p in enumerate(paths))


def _commented(paths, cell):
    """An inline comment in parentheses after each path's first cell."""
    def line(i, p):
        first, rest = cell(i, 0, p[0]), [cell(i, t, c) for t, c in enumerate(p) if t]
        note = f"(leaves ({p[0][0]},{p[0][1]}) first, detour around the hole)"
        return f"Agent {i + 1}: " + " ".join([first, note, *rest])
    return "\n".join(line(i, p) for i, p in enumerate(paths))


def _table(paths, cell):
    rows = [f"| Agent {i + 1} | {_cells(p, cell, i)} |" for i, p in enumerate(paths)]
    return "\n".join(["| Agent | Path |", "|-------|------|", *rows])


def _wide_table(paths, cell):
    rows = [f"| {i + 1} | ({p[0][0]},{p[0][1]}) | ({p[-1][0]},{p[-1][1]}) | {len(p) - 1} | "
            f"{_cells(p, cell, i, ' -> ')} |" for i, p in enumerate(paths)]
    return "\n".join(["| Agent | Start | Goal | Steps | Path |", "|---|---|---|---|---|", *rows])


def _time_table(paths, cell):
    horizon = max(len(p) for p in paths)
    padded = [p + [p[-1]] * (horizon - len(p)) for p in paths]
    head = "| t | " + " | ".join(f"Agent {i + 1}" for i in range(len(paths))) + " |"
    rule = "|---" * (len(paths) + 1) + "|"
    rows = [f"| {t} | " + " | ".join(cell(i, t, p[t]) for i, p in enumerate(padded)) + " |"
            for t in range(horizon)]
    return "\n".join([head, rule, *rows])


def _fenced(paths, cell):
    return "```text\n" + _lines("Agent {i}:")(paths, cell) + "\n```"


LAYOUTS = {
    "colon": _lines("Agent {i}:"), "arrow_label": _lines("Agent {i} ->"),
    "dash_label": _lines("Agent {i} -"), "equals_label": _lines("Agent {i} ="),
    "arrows": _lines("Agent {i}:", " -> "), "commas": _lines("Agent {i}:", ", "),
    "bold": _lines("**Agent {i}** path:", " → "), "annotated": _annotated,
    "colon_annotated": _colon_annotated, "commented": _commented, "table": _table,
    "wide_table": _wide_table, "time_table": _time_table, "fenced": _fenced,
}


def _plain(i, t, c):
    return f"({c[0]},{c[1]})"


PROSE = st.one_of(
    st.sampled_from(["Let me check every time step for conflicts.", "All agents avoid the holes.",
                     "", "This is the shortest plan I can find.", "Both routes are collision-free."]),
    st.integers(0, 30).map(lambda n: f"Total cost: {n}."),
    st.integers(0, 30).map(lambda n: f"A {n}-step path is the best for this agent."),
    st.tuples(st.integers(1, 3), st.integers(0, 30)).map(lambda x: f"Agent {x[0]} cost: {x[1]}"),
    st.tuples(st.integers(1, 3), st.integers(0, 30)).map(
        lambda x: f"Agent {x[0]} reaches its goal at t={x[1]}."),
    st.tuples(st.integers(1, 3), st.integers(0, 9), st.integers(0, 9)).map(
        lambda x: f"Agent {x[0]} waits at ({x[1]},{x[2]}) for one step."),
    st.tuples(st.integers(0, 9), st.integers(0, 9)).map(lambda x: f"The hole at ({x[0]},{x[1]}) blocks the way."),
)
"""Lines a verbose answer writes around its plan: none of them states a coordinate sequence."""


def _with_prose(plan_text, layout, before, between, after):
    lines = plan_text.split("\n")
    if between and layout not in {"table", "wide_table", "time_table", "fenced"}:
        lines = [x for line in lines for x in (line, between)][:-1]
    return "\n".join([*before, *lines, *after])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(LAYOUTS)), st.sampled_from([2, 3]), st.integers(0, 23),
       st.lists(PROSE, max_size=3), st.one_of(st.none(), PROSE), st.lists(PROSE, max_size=3))
def test_a_valid_plan_in_any_layout_with_prose_around_parses_to_its_paths(layout, k, index, before,
                                                                          between, after):
    inst = pool(k)[index]
    text = _with_prose(LAYOUTS[layout](inst.optimal_plan, _plain), layout, before, between, after)
    r = parse_plan(text, k, inst.starts)
    assert r.ok and _settled(r.paths) == _settled(inst.optimal_plan), (text, r)
    v = validate(inst, text)
    assert v.valid and v.optimal, (text, v.reasons)


def _settled(paths):
    """Paths without the steps an agent rests on its final cell (a per-time-step table writes them)."""
    out = []
    for p in paths:
        p = list(p)
        while len(p) > 1 and p[-1] == p[-2]:
            p.pop()
        out.append(p)
    return out


BAD_CELLS = [lambda r, c: f"({r},{c}.5)", lambda r, c: f"({r},{c},1)", lambda r, c: f"({r};{c})",
             lambda r, c: f"({r}, )", lambda r, c: f"[{r},{c},{c}]"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(LAYOUTS)), st.sampled_from([2, 3]), st.integers(0, 23),
       st.integers(0, 2), st.integers(0, 40), st.sampled_from(range(len(BAD_CELLS))),
       st.lists(PROSE, max_size=2), st.lists(PROSE, max_size=2))
def test_one_malformed_cell_fails_parsable_with_its_reason(layout, k, index, agent, step, bad,
                                                           before, after):
    inst = pool(k)[index]
    agent = agent % k
    step = step % len(inst.optimal_plan[agent])

    def cell(i, t, c):
        return BAD_CELLS[bad](*c) if (i, t) == (agent, step) else _plain(i, t, c)

    text = _with_prose(LAYOUTS[layout](inst.optimal_plan, cell), layout, before, None, after)
    v = validate(inst, text)
    assert v.checks["parsable"] is False, (text, v.checks)
    assert "malformed cell" in v.reasons["parsable"], v.reasons
    assert all(v.checks[c] is None for c in CHECKS[1:])


# -- held-back answers ---------------------------------------------------------------------------

# A 3x3 lake with a hole in the middle: agent 1 goes along the top row, agent 2 along the bottom.
LAKE = Instance(3, 3, frozenset({(1, 1)}), [(0, 0), (2, 0)], [(0, 2), (2, 2)], optimal_cost=4)
PLAN = "Agent 1: (0,0) (0,1) (0,2)\nAgent 2: (2,0) (2,1) (2,2)"
VALID = set()
UNPARSABLE = {"parsable"}
ONE_CELL = Instance(3, 3, frozenset({(1, 1)}), [(0, 0), (2, 2)], [(0, 2), (2, 2)], optimal_cost=2)
"""Agent 2 starts on its goal: its path is one cell."""

HELD_BACK = [
    ("summary_costs", PLAN + "\n\nAgent 1 cost: 2\nAgent 2 cost: 2\nTotal cost: 4", VALID),
    ("summary_arrivals", PLAN + "\nAgent 1 reaches its goal at t=2.\nAgent 2 reaches its goal at t=2.",
     VALID),
    ("summary_steps", "A 2-step path exists for each agent.\n" + PLAN + "\nA 2-step path is optimal.",
     VALID),
    ("summary_wait_cell", PLAN + "\nAgent 2 never waits at (2,0).", VALID),
    ("one_cell_path_with_a_comment", "Agent 1: (0,0) (0,1) (0,2)\nAgent 2: (2,2), already on its goal",
     VALID, ONE_CELL),
    ("one_cell_path_annotated", "Agent 1: (0,0) (0,1) (0,2)\nAgent 2: start (2,2), goal (2,2): (2,2)\n"
                                "Agent 2: stays at (2,2).", VALID, ONE_CELL),
    ("summary_after_dash", "Agent 1: (0,0) (0,1) (0,2) — 2 steps, arrives at t=2\n"
                           "Agent 2: (2,0) (2,1) (2,2) — 2 steps, arrives at t=2", VALID),
    ("inline_comment", "Agent 1: (0,0) (0,1) (detour around the hole at (1,1)) (0,2)\n"
                       "Agent 2: (2,0) (2,1) [below the hole] (2,2)", VALID),
    ("table_rows", "| Agent 1 | (0,0) (0,1) (0,2) |\n| Agent 2 | (2,0) (2,1) (2,2) |", VALID),
    ("table_with_header", "Plan:\n\n| Agent | Path |\n|---|---|\n| 1 | (0,0) → (0,1) → (0,2) |\n"
                          "| 2 | (2,0) → (2,1) → (2,2) |\n\nBoth avoid the hole.", VALID),
    ("table_start_goal_path", "| Agent | Start | Goal | Path |\n|:-:|:-:|:-:|:--|\n"
                              "| Agent 1 | (0,0) | (0,2) | (0,0), (0,1), (0,2) |\n"
                              "| Agent 2 | (2,0) | (2,2) | (2,0), (2,1), (2,2) |", VALID),
    ("table_per_time_step", "| t | Agent 1 | Agent 2 |\n|---|---|---|\n| 0 | (0,0) | (2,0) |\n"
                            "| 1 | (0,1) | (2,1) |\n| 2 | (0,2) | (2,2) |", VALID),
    ("summary_table_after_plan", PLAN + "\n\n| Agent | Start | Goal | Cost |\n|---|---|---|---|\n"
                                        "| 1 | (0,0) | (0,2) | 2 |\n| 2 | (2,0) | (2,2) | 2 |", VALID),
    ("annotated_label", "Agent 1 (start (0,0), goal (0,2)): (0,0) (0,1) (0,2)\n"
                        "Agent 2 (start (2,0), goal (2,2)): (2,0) (2,1) (2,2)", VALID),
    ("annotated_bold_label", "**Agent 1** [from (0,0) to (0,2)]: (0,0) → (0,1) → (0,2)\n\n"
                             "**Agent 2** [from (2,0) to (2,2)]: (2,0) → (2,1) → (2,2)", VALID),
    ("colon_annotation", "Agent 1: start (0,0), goal (0,2): (0,0) (0,1) (0,2)\n"
                         "Agent 2: start (2,0), goal (2,2): (2,0) (2,1) (2,2)", VALID),
    ("arrow_label", "Agent 1 -> (0,0) (0,1) (0,2)\nAgent 2 -> (2,0) (2,1) (2,2)", VALID),
    ("dash_and_equals_labels", "Agent 1 - (0,0) (0,1) (0,2)\nAgent 2 = (2,0) (2,1) (2,2)", VALID),
    ("fenced_with_prose", "The hole at (1,1) splits the lake.\n```\n" + PLAN + "\n```\n"
                          "Each agent takes 2 steps.", VALID),
    ("think_then_verbose", "<think>Agent 1 could go (0,0) (1,0)? No, ...</think>\nHere is my plan.\n\n"
                           + PLAN + "\n\nAgent 1 cost: 2", VALID),
    ("prose_between", "Agent 1: (0,0) (0,1) (0,2)\nAgent 1 stays on the top row.\n"
                      "Agent 2: (2,0) (2,1) (2,2)\nAgent 2 stays on the bottom row.", VALID),
    ("revision_counts_last", "Agent 1: (0,0) (1,0) (2,0)\nAgent 2: (2,0) (2,1) (2,2)\n"
                             "Wait, both agents are at (2,0) at t=0. Corrected:\n" + PLAN, VALID),
    ("revision_to_a_wrong_plan", PLAN + "\nActually, let me shorten agent 2's route.\n"
                                        "Agent 1: (0,0) (0,1) (0,2)\nAgent 2: (2,0) (2,1)",
     {"goal_reached"}),
    ("partial_restatement", PLAN + "\n\nAgent 2: (2,0) (2,1)", {"agent_count", "goal_reached"}),
    ("repeat_before_complete", "Agent 1: (0,0) (0,1) (0,2)\nAgent 1: (0,0) (0,1) (0,2)\n"
                               "Agent 2: (2,0) (2,1) (2,2)", {"agent_count"}),
    ("extra_unlabeled_line", PLAN + "\n(1,0) (1,0)", {"agent_count"}),
    ("through_the_hole", "Agent 1: (0,0) (0,1) (1,1) (1,2) (0,2)\nAgent 2: (2,0) (2,1) (2,2)",
     {"hole_free"}),
    ("fractional_cell", "Agent 1: (0,0) (0,0.5) (0,1) (0,2)\nAgent 2: (2,0) (2,1) (2,2)", UNPARSABLE),
    ("three_numbers", "Agent 1: (0,0) (0,1,1) (0,2)\nAgent 2: (2,0) (2,1) (2,2)", UNPARSABLE),
    ("malformed_in_table", "| Agent | Path |\n|---|---|\n| 1 | (0,0) (0,1) (0,2) |\n"
                           "| 2 | (2,0) (2;1) (2,2) |", UNPARSABLE),
    ("prose_only", "Agent 1 goes right twice and agent 2 goes right twice. Total cost: 4.",
     UNPARSABLE),
]


@pytest.mark.parametrize("name,text,failed,inst", [(*h, LAKE)[:4] for h in HELD_BACK],
                         ids=[h[0] for h in HELD_BACK])
def test_held_back_answers_get_the_verdict_of_the_eight_checks(name, text, failed, inst):
    v = validate(inst, text)
    assert {c for c in CHECKS if v.checks[c] is False} == failed, (v.checks, v.reasons)
    if not failed:
        assert v.valid and v.optimal and v.cost == inst.optimal_cost
    if name in {"fractional_cell", "three_numbers", "malformed_in_table"}:
        assert "malformed cell" in v.reasons["parsable"], v.reasons
