"""Every prompt style carries the same instance information; the short ones are shorter."""

from __future__ import annotations

import re

import numpy as np
import pytest

from testbeds.mapf_frozenlake.config import uniform_config
from testbeds.mapf_frozenlake.generator import generate
from testbeds.mapf_frozenlake.prompts import render_prompt
from testbeds.mapf_frozenlake.testbed import MAPFTestbed, MAPFTestbedConfig

_CELL = re.compile(r"\((\d+),(\d+)\)")


def _instances(agents: int = 3):
    return generate(uniform_config(0.25), 16, agents=agents, seed=7).instances


def _facts(text: str, inst) -> dict:
    """What a reader can recover from a prompt: size, hole cells (from the drawing or the list),
    each agent's start and goal."""
    lines = text.splitlines()
    size = tuple(map(int, re.search(r"Grid (\d+)x(\d+)", text).groups()))
    grid = [ln.split() for ln in lines if re.fullmatch(r"[FH]( [FH])*", ln)]
    coords = [ln.split() for ln in lines if re.fullmatch(r"(H|\(\d+,\d+\))( (H|\(\d+,\d+\)))*", ln)
              and not ln.startswith("Agent")]
    if coords:  # the coords drawing: every walkable cell names itself, at its own place
        assert not grid
        for r, row in enumerate(coords):
            for c, cell in enumerate(row):
                assert cell in ("H", f"({r},{c})"), (r, c, cell)
        grid = [["H" if cell == "H" else "F" for cell in row] for row in coords]
    holes = {(r, c) for r, row in enumerate(grid) for c, cell in enumerate(row) if cell == "H"}
    listed = [ln for ln in lines if ln.startswith("Holes:")]
    if listed:
        assert not grid  # one map representation per prompt
        holes = {tuple(map(int, c)) for c in _CELL.findall(listed[0])}
    else:
        assert [len(row) for row in grid] == [size[1]] * size[0]
    agent_lines = [ln for ln in lines if re.match(r"Agent \d+ ", ln) or re.match(r"Agent \d+: \(\d", ln)]
    # Exactly two cells per agent line: the format example ("Agent 1: (0,0) (0,1) (1,1)") is not an agent.
    pairs = [tuple(tuple(map(int, c)) for c in _CELL.findall(ln)) for ln in agent_lines]
    pairs = [p for p in pairs if len(p) == 2]
    return {"size": size, "holes": holes, "agents": pairs}


@pytest.mark.parametrize("answer", ["cells", "moves"])
@pytest.mark.parametrize("style", ["compact", "holes", "coords"])
@pytest.mark.parametrize("inst", _instances(), ids=lambda i: i.size)
def test_every_style_carries_the_same_instance_as_the_paper_prompt(inst, style, answer):
    paper = "\n".join(m["content"] for m in render_prompt(inst, "paper"))
    short = "\n".join(m["content"] for m in render_prompt(inst, style, answer))
    facts = _facts(short, inst)
    assert facts == _facts(paper, inst)
    assert facts["size"] == (inst.h, inst.w)
    assert facts["holes"] == set(inst.holes)
    assert facts["agents"] == [(tuple(s), tuple(g)) for s, g in zip(inst.starts, inst.goals)]
    if style != "coords":  # coords spends ~5 tokens per walkable cell on purpose
        assert len(short) < len(paper)


def test_the_coords_map_names_only_walkable_cells():
    """In the coords style a hole's and an off-grid cell's coordinates never appear in the map,
    and every walkable cell does, once."""
    for inst in _instances():
        text = render_prompt(inst, "coords")[1]["content"]
        drawing = text.split(":\n", 1)[1].split("\nAgent 1:", 1)[0]
        shown = [tuple(map(int, c)) for c in _CELL.findall(drawing)]
        walkable = {(r, c) for r in range(inst.h) for c in range(inst.w)} - set(inst.holes)
        assert sorted(shown) == sorted(walkable)


def test_a_map_without_holes_says_so():
    inst = _instances()[0]
    inst.holes = frozenset()
    assert "Holes: none" in render_prompt(inst, "holes")[1]["content"]


def test_both_styles_state_every_rule_and_the_answer_format():
    inst = _instances(2)[0]
    for style in ("paper", "compact", "holes", "coords"):
        text = " ".join(m["content"] for m in render_prompt(inst, style)).lower()
        for rule in ("up", "down", "left", "right", "wait", "hole", "grid", "swap", "goal", "agent 1: ("):
            assert rule in text, (style, rule)


@pytest.mark.parametrize("style", ["paper", "compact", "holes", "coords"])
def test_the_moves_answer_format_is_asked_for_in_every_style(style):
    inst = _instances(2)[0]
    cells = " ".join(m["content"] for m in render_prompt(inst, style, "cells")).lower()
    moves = " ".join(m["content"] for m in render_prompt(inst, style, "moves")).lower()
    for word in ("u up", "d down", "l left", "r right", "w wait", "agent 1: r d"):
        pattern = rf"\b{word}\b"
        assert re.search(pattern, moves) and not re.search(pattern, cells), (style, word)
    assert "agent 1: (" not in moves.split("agent 1: r d")[-1]  # the example is a move line


@pytest.mark.parametrize("inst", _instances(), ids=lambda i: i.size)
def test_a_moves_reference_answer_is_the_optimal_plan(inst):
    """The warm start's reference answer in moves walks back (parser) to the stored optimal
    plan, which the validator scores valid and optimal; it is ~3x shorter than the cells one."""
    from testbeds.mapf_frozenlake.parse import format_moves, format_plan, parse_plan
    from testbeds.mapf_frozenlake.validate import validate

    text = format_moves(inst.optimal_plan)
    assert parse_plan(text, inst.num_agents, inst.starts).paths == [list(p) for p in inst.optimal_plan]
    verdict = validate(inst, text)
    assert verdict.valid and verdict.optimal
    assert len(text) * 2 < len(format_plan(inst.optimal_plan))
    testbed = MAPFTestbed(MAPFTestbedConfig(answer_format="moves"))
    assert testbed.reference_answer(testbed.task_of(inst)) == text


def test_testbed_prompt_style_and_eval_sizes():
    testbed = MAPFTestbed(MAPFTestbedConfig(prompt_style="compact", eval_agents=[2],
                                            eval_sizes=["4x4", "3x3"], eval_instances_per_size=2))
    tasks = testbed.eval_tasks()
    assert [t.features["size"] for t in tasks] == ["3x3", "3x3", "4x4", "4x4"]
    assert tasks[0].messages == render_prompt(testbed.eval_instances()[0], "compact")
    with pytest.raises(ValueError, match="subset"):
        MAPFTestbedConfig(eval_sizes=["11x11"])


def test_warmstart_tasks_cover_only_warmstart_sizes():
    testbed = MAPFTestbed(MAPFTestbedConfig(warmstart_sizes=["3x3", "5x5"]))
    tasks = testbed.warmstart_tasks(8, seed=0)
    assert sorted({t.features["size"] for t in tasks}) == ["3x3", "5x5"]
    assert len(tasks) == 8 and all(testbed.reference_answer(t) for t in tasks)
    again = testbed.warmstart_tasks(8, seed=0)
    assert [t.data for t in again] == [t.data for t in tasks]
    assert np.mean([t.features["agents"] for t in tasks]) == 2
    mixed = MAPFTestbed(MAPFTestbedConfig(warmstart_agents=[2, 3])).warmstart_tasks(9, seed=0)
    assert sorted(t.features["agents"] for t in mixed) == [2] * 5 + [3] * 4
