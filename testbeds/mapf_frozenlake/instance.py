"""A MAPF-FrozenLake instance and its JSONL format.

Coordinates are ``(row, col)`` with ``(0, 0)`` the top-left cell. An instance is an ``h × w`` grid,
a set of hole cells, and ``k`` agents with pairwise-distinct starts and pairwise-distinct goals
(an agent's goal may be another agent's start). A plan is one path per agent, a list of cells at
times ``0, 1, …``; after its last entry an agent stays on its final cell. An agent's cost is the
time of its last arrival at its goal; the plan's cost is the sum over agents (sum of costs).

JSONL line: ``{"h": 5, "w": 5, "holes": [[r, c], ...], "starts": [[r, c], ...],
"goals": [[r, c], ...]}`` plus optional ``"id"``, ``"optimal_plan"`` (list of paths of
``[r, c]``), ``"optimal_cost"`` and ``"needs_wait"``; other keys are ignored.

Validity (``instance_problems``; every ``Instance`` is checked when it is built, so the solver,
the validator, the gym env and the testbed all refuse the same inputs with the same reasons):

* sides ``h`` and ``w`` are integers in ``[1, MAX_SIDE]`` (the paper's maps are 3x3 … 10x10;
  ``MAX_SIDE`` bounds memory and the validator's move table);
* between 1 and ``MAX_AGENTS`` agents, as many goals as starts;
* every start, goal and hole lies on the grid; starts are pairwise distinct, goals are pairwise
  distinct, and no start or goal is a hole;
* a given ``optimal_plan`` has one path per agent, and ``optimal_cost`` is a non-negative integer.

An invalid instance raises ``InvalidInstance`` (a ``ValueError``) listing every reason; it is
an input error, never "unsolvable".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

Cell = tuple[int, int]
Path = list[Cell]

MAX_SIDE = 64
"""Largest accepted grid side (rows or columns)."""
MAX_AGENTS = 16
"""Most agents accepted (the paper evaluates up to 5; the CG heuristic is exponential in it)."""


class InvalidInstance(ValueError):
    """An instance that is not a MAPF-FrozenLake problem; ``reasons`` says every way it is not."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = list(reasons)
        super().__init__("invalid instance: " + "; ".join(self.reasons))


@dataclass
class Instance:
    """One MAPF problem, optionally with its optimal plan."""

    h: int
    w: int
    holes: frozenset[Cell]
    starts: list[Cell]
    goals: list[Cell]
    optimal_plan: list[Path] | None = None
    optimal_cost: int | None = None
    needs_wait: bool | None = None
    id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.holes = frozenset((int(r), int(c)) for r, c in self.holes)
        self.starts = [(int(r), int(c)) for r, c in self.starts]
        self.goals = [(int(r), int(c)) for r, c in self.goals]
        if self.optimal_plan is not None:
            self.optimal_plan = [[(int(r), int(c)) for r, c in p] for p in self.optimal_plan]
        problems = self.check()
        if problems:
            raise InvalidInstance(problems)

    @property
    def num_agents(self) -> int:
        return len(self.starts)

    @property
    def size(self) -> str:
        return f"{self.h}x{self.w}"

    @property
    def hole_ratio(self) -> float:
        return len(self.holes) / (self.h * self.w)

    def check(self) -> list[str]:
        """Every reason this instance is invalid (empty when it is valid)."""
        return instance_problems(self.h, self.w, self.holes, self.starts, self.goals,
                                 self.optimal_plan, self.optimal_cost)

    def to_dict(self, *, with_solution: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.id is not None:
            d["id"] = self.id
        d.update({
            "h": self.h, "w": self.w,
            "holes": [list(c) for c in sorted(self.holes)],
            "starts": [list(c) for c in self.starts],
            "goals": [list(c) for c in self.goals],
        })
        if with_solution:
            if self.optimal_plan is not None:
                d["optimal_plan"] = [[list(c) for c in p] for p in self.optimal_plan]
            if self.optimal_cost is not None:
                d["optimal_cost"] = self.optimal_cost
            if self.needs_wait is not None:
                d["needs_wait"] = self.needs_wait
        return d

    def to_json(self, *, with_solution: bool = True) -> str:
        return json.dumps(self.to_dict(with_solution=with_solution), separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: Any) -> Instance:
        """Build and check an instance from its JSON object; ``InvalidInstance`` names every
        missing or malformed field, or every validity rule it breaks."""
        return cls(**_fields_of(d))

    @classmethod
    def from_json(cls, s: str | dict[str, Any]) -> Instance:
        return cls.from_dict(json.loads(s) if isinstance(s, str) else s)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _cells(value: Any, name: str, reasons: list[str]) -> list[Cell]:
    """A JSON list of ``[r, c]`` integer pairs, or a reason why not."""
    if not isinstance(value, list):
        reasons.append(f"'{name}' must be a list of [row, col] pairs")
        return []
    out = []
    for i, c in enumerate(value):
        if not (isinstance(c, list | tuple) and len(c) == 2 and all(_is_int(x) for x in c)):
            reasons.append(f"'{name}'[{i}] must be a [row, col] pair of integers (got {c!r:.40})")
            return []
        out.append((c[0], c[1]))
    return out


def _fields_of(d: Any) -> dict[str, Any]:
    """The constructor arguments in an instance's JSON object (types checked, not validity)."""
    if not isinstance(d, dict):
        raise InvalidInstance([f"an instance must be a JSON object (got {type(d).__name__})"])
    reasons: list[str] = []
    missing = [k for k in ("h", "w", "starts", "goals") if k not in d]
    if missing:
        reasons.append("missing field" + "s" * (len(missing) > 1) + " "
                       + ", ".join(f"'{k}'" for k in missing))
    for k in ("h", "w"):
        if k in d and not _is_int(d[k]):
            reasons.append(f"'{k}' must be an integer (got {d[k]!r:.40})")
    out: dict[str, Any] = {k: _cells(d[k], k, reasons) for k in ("starts", "goals") if k in d}
    out["holes"] = frozenset(_cells(d.get("holes", []), "holes", reasons))
    plan = d.get("optimal_plan")
    if plan is not None:
        if not isinstance(plan, list):
            reasons.append("'optimal_plan' must be a list of paths")
        else:
            plan = [_cells(p, f"optimal_plan[{i}]", reasons) for i, p in enumerate(plan)]
    cost = d.get("optimal_cost")
    if cost is not None and not _is_int(cost):
        reasons.append(f"'optimal_cost' must be an integer (got {cost!r:.40})")
    wait = d.get("needs_wait")
    if wait is not None and not isinstance(wait, bool):
        reasons.append(f"'needs_wait' must be true or false (got {wait!r:.40})")
    if reasons:
        raise InvalidInstance(reasons)
    return dict(out, h=d["h"], w=d["w"], optimal_plan=plan, optimal_cost=cost, needs_wait=wait,
                id=d.get("id"))


def instance_problems(h: int, w: int, holes: frozenset[Cell], starts: list[Cell],
                      goals: list[Cell], optimal_plan: list[Path] | None = None,
                      optimal_cost: int | None = None) -> list[str]:
    """Every validity rule of the module docstring that these fields break, as readable reasons."""
    errs: list[str] = []
    if not (1 <= h <= MAX_SIDE and 1 <= w <= MAX_SIDE):
        errs.append(f"grid {h}x{w} is out of range (each side must be 1..{MAX_SIDE})")
        return errs  # nothing else can be judged against an impossible grid
    k = len(starts)
    if len(goals) != k:
        errs.append(f"{k} starts but {len(goals)} goals")
    if not 1 <= k <= MAX_AGENTS:
        errs.append(f"{k} agents (must be 1..{MAX_AGENTS})")

    def on_grid(c: Cell) -> bool:
        return 0 <= c[0] < h and 0 <= c[1] < w

    off = sorted(c for c in holes if not on_grid(c))
    if off:
        errs.append(f"hole {off[0]} is off the {h}x{w} grid" + (f" (and {len(off) - 1} more)"
                                                               if len(off) > 1 else ""))
    for name, cells in (("start", starts), ("goal", goals)):
        seen: dict[Cell, int] = {}
        for i, c in enumerate(cells):
            if c in seen:
                errs.append(f"agents {seen[c] + 1} and {i + 1} share {name} {c}")
            seen.setdefault(c, i)
            if not on_grid(c):
                errs.append(f"{name} of agent {i + 1} {c} is off the {h}x{w} grid")
            elif c in holes:
                errs.append(f"{name} of agent {i + 1} {c} is a hole")
    if optimal_plan is not None and len(optimal_plan) != k:
        errs.append(f"optimal_plan has {len(optimal_plan)} paths for {k} agents")
    if optimal_cost is not None and optimal_cost < 0:
        errs.append(f"optimal_cost {optimal_cost} is negative")
    return errs


def plan_cost(plan: list[Path], goals: list[Cell]) -> int:
    """Sum of costs: each agent's cost is the time of its last arrival at its goal
    (the index after the last entry that is not its goal; 0 if it never leaves it)."""
    total = 0
    for path, goal in zip(plan, goals):
        t = len(path) - 1
        while t >= 0 and path[t] == goal:
            t -= 1
        total += t + 1
    return total
