"""The prompt a policy reads for one instance (kept short for ~300-token CPU budgets).

The grid is drawn FrozenLake style, one row per line: ``F`` frozen (walkable), ``H`` hole; agent
starts and goals are listed below it as ``(row,col)`` with ``(0,0)`` top-left. The answer
format asked for is ``parse.py``'s canonical one: ``Agent i: (r,c) (r,c) ...``.
"""

from __future__ import annotations

from testbeds.mapf_frozenlake.instance import Instance

SYSTEM = ("You solve multi-agent path finding puzzles on frozen lakes. "
          "Think briefly, then give the final plan.")

RULES = ("Each step every agent moves one cell up, down, left or right, or waits. "
         "Never enter a hole (H) or leave the grid. Two agents may never be in the same cell "
         "at the same time or swap cells in one step. An agent stays on its goal after its "
         "path ends. Use as few total steps as possible.")

FORMAT = ("Answer with one line per agent: its cell at every time step from its start to its "
          "goal (repeat a cell to wait), e.g.\nAgent 1: (0,0) (0,1) (1,1)")


def render_grid(inst: Instance) -> str:
    """Rows of ``F``/``H`` separated by spaces."""
    return "\n".join(" ".join("H" if (r, c) in inst.holes else "F" for c in range(inst.w))
                     for r in range(inst.h))


def render_user(inst: Instance) -> str:
    agents = "\n".join(f"Agent {i + 1} starts at ({s[0]},{s[1]}), goal ({g[0]},{g[1]})."
                       for i, (s, g) in enumerate(zip(inst.starts, inst.goals)))
    return (f"Grid {inst.h}x{inst.w}, cells (row,col), (0,0) is top-left:\n{render_grid(inst)}\n"
            f"{agents}\n{RULES}\n{FORMAT}")


def render_prompt(inst: Instance) -> list[dict[str, str]]:
    """Chat messages for ``inst``."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": render_user(inst)}]
