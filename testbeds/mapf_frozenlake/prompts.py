"""The prompt a policy reads for one instance, in two styles that carry the same information.

Both draw the grid FrozenLake style, one row per line (``F`` frozen/walkable, ``H`` hole), list
every agent's start and goal as ``(row,col)`` with ``(0,0)`` top-left, state the movement and
conflict rules, and ask for ``parse.py``'s canonical answer format ``Agent i: (r,c) (r,c) ...``.

* ``paper`` (default, used by the paper configs): full sentences (~280 tokens on an 8x8 map).
* ``compact``: the same facts in terse notation (~40% of the tokens on small maps), for CPU
  budgets where every prompt token costs forward+backward time.
* ``holes``: ``compact``, but the map is the list of its hole cells as ``(row,col)`` instead of a
  drawing: the cells to avoid are written in the notation of the answer itself, so a plan that
  steps into a hole repeats a pair it was shown, rather than needing a row/column lookup in the
  drawing. (A drawing costs 2 tokens per cell, the list 5-6 per hole: fewer tokens at the 20% hole
  ratio of the CPU demo.)
* ``coords``: ``compact``, but the drawing writes every walkable cell as its own ``(row,col)`` and
  every hole as ``H``. The cells a plan may use then appear in the prompt in the answer's own
  notation, and a hole's or an off-grid cell's coordinates appear nowhere, so copying a cell from
  the map can only give a walkable one; a step right is the next cell of the drawing's line.
  (Positive lookup, where ``holes`` asks the model to avoid what it was shown.) It costs ~5 tokens
  per walkable cell instead of 1.

Independently of the style, ``answer`` picks what the model writes: ``cells`` (the paper's
plan, each agent's cell at every step) or ``moves`` (each agent's moves from its start,
``Agent 1: R D W``: one token per step instead of ~6, so a plan is a quarter of the tokens to
generate and to train on; ``parse.py`` walks them back into cells and the validator's eight
checks are unchanged).

``compact``, ``holes`` and ``moves`` are written here, not in the paper; ``tests/mapf_frozenlake/
test_mapf_prompts.py`` checks every style renders the same instance information (size, holes,
starts, goals, rules, format).
"""

from __future__ import annotations

from typing import Literal

from testbeds.mapf_frozenlake.instance import Instance

PromptStyle = Literal["paper", "compact", "holes", "coords"]
AnswerFormat = Literal["cells", "moves"]

SYSTEM = ("You solve multi-agent path finding puzzles on frozen lakes. "
          "Think briefly, then give the final plan.")

RULES = ("Each step every agent moves one cell up, down, left or right, or waits. "
         "Never enter a hole (H) or leave the grid. Two agents may never be in the same cell "
         "at the same time or swap cells in one step. An agent stays on its goal after its "
         "path ends. Use as few total steps as possible.")

FORMAT = ("Answer with one line per agent: its cell at every time step from its start to its "
          "goal (repeat a cell to wait), e.g.\nAgent 1: (0,0) (0,1) (1,1)")

COMPACT_SYSTEM = "Solve multi-agent path finding."

COMPACT_RULES = ("Each step: move up/down/left/right or wait. No holes, stay on grid, no shared "
                 "cell, no swaps; agents stay at goals. Fewest total steps.")

COMPACT_FORMAT = "One line per agent, its cell at every step (repeat to wait):"

MOVES_FORMAT = ("Answer with one line per agent: its moves from its start to its goal, U up, "
                "D down, L left, R right, W wait, e.g.\nAgent 1: R D D")

COMPACT_MOVES_FORMAT = "One line per agent, its moves (U up, D down, L left, R right, W wait):"

_EXAMPLE = {"cells": "Agent 1: (r,c) (r,c) ...", "moves": "Agent 1: R D ..."}


def render_grid(inst: Instance) -> str:
    """Rows of ``F``/``H`` separated by spaces (one token per cell under BPE tokenizers)."""
    return "\n".join(" ".join("H" if (r, c) in inst.holes else "F" for c in range(inst.w))
                     for r in range(inst.h))


def _paper_user(inst: Instance, answer: AnswerFormat) -> str:
    agents = "\n".join(f"Agent {i + 1} starts at ({s[0]},{s[1]}), goal ({g[0]},{g[1]})."
                       for i, (s, g) in enumerate(zip(inst.starts, inst.goals)))
    return (f"Grid {inst.h}x{inst.w}, cells (row,col), (0,0) is top-left:\n{render_grid(inst)}\n"
            f"{agents}\n{RULES}\n{FORMAT if answer == 'cells' else MOVES_FORMAT}")


def _compact_agents_and_rules(inst: Instance, answer: AnswerFormat) -> str:
    """The terse styles' common tail: each agent's start and goal, the rules, the answer format."""
    agents = "\n".join(f"Agent {i + 1}: ({s[0]},{s[1]}) to ({g[0]},{g[1]})"
                       for i, (s, g) in enumerate(zip(inst.starts, inst.goals)))
    fmt = COMPACT_FORMAT if answer == "cells" else COMPACT_MOVES_FORMAT
    return f"{agents}\n{COMPACT_RULES}\n{fmt}\n{_EXAMPLE[answer]}"


def _compact_user(inst: Instance, answer: AnswerFormat) -> str:
    return (f"Grid {inst.h}x{inst.w}, H hole, (row,col), (0,0) top-left:\n{render_grid(inst)}\n"
            f"{_compact_agents_and_rules(inst, answer)}")


def render_holes(inst: Instance) -> str:
    """The hole cells in row-major order, ``(r,c)`` each, or ``none``."""
    return " ".join(f"({r},{c})" for r, c in sorted(inst.holes)) or "none"


def _holes_user(inst: Instance, answer: AnswerFormat) -> str:
    return (f"Grid {inst.h}x{inst.w}, (row,col), (0,0) top-left.\nHoles: {render_holes(inst)}\n"
            f"{_compact_agents_and_rules(inst, answer)}")


def render_coords(inst: Instance) -> str:
    """Rows of the drawing with each walkable cell written as ``(r,c)`` and each hole as ``H``."""
    return "\n".join(" ".join("H" if (r, c) in inst.holes else f"({r},{c})" for c in range(inst.w))
                     for r in range(inst.h))


def _coords_user(inst: Instance, answer: AnswerFormat) -> str:
    return (f"Grid {inst.h}x{inst.w}, H hole, each walkable cell as (row,col), (0,0) top-left:\n"
            f"{render_coords(inst)}\n{_compact_agents_and_rules(inst, answer)}")


_USER = {"paper": _paper_user, "compact": _compact_user, "holes": _holes_user, "coords": _coords_user}


def render_user(inst: Instance, style: PromptStyle = "paper", answer: AnswerFormat = "cells") -> str:
    """The user message for ``inst`` in ``style``, asking for the plan as ``answer``."""
    return _USER[style](inst, answer)


def render_prompt(inst: Instance, style: PromptStyle = "paper",
                  answer: AnswerFormat = "cells") -> list[dict[str, str]]:
    """Chat messages for ``inst``."""
    system = SYSTEM if style == "paper" else COMPACT_SYSTEM
    return [{"role": "system", "content": system},
            {"role": "user", "content": render_user(inst, style, answer)}]
