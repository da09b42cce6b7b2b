"""A MAPF-FrozenLake instance and its JSONL format.

Coordinates are ``(row, col)`` with ``(0, 0)`` the top-left cell. An instance is an ``h × w`` grid,
a set of hole cells, and ``k`` agents with pairwise-distinct starts and pairwise-distinct goals
(an agent's goal may be another agent's start). A plan is one path per agent, a list of cells at
times ``0, 1, …``; after its last entry an agent stays on its final cell. An agent's cost is the
time of its last arrival at its goal; the plan's cost is the sum over agents (sum of costs).

JSONL line: ``{"h": 5, "w": 5, "holes": [[r, c], ...], "starts": [[r, c], ...],
"goals": [[r, c], ...]}`` plus optional ``"id"``, ``"optimal_plan"`` (list of paths of
``[r, c]``), ``"optimal_cost"`` and ``"needs_wait"``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

Cell = tuple[int, int]
Path = list[Cell]


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
        """Structural problems (empty list when well formed)."""
        errs = []
        if self.h < 1 or self.w < 1:
            errs.append("grid must be at least 1x1")
        if len(self.starts) != len(self.goals):
            errs.append("starts and goals differ in number")
        for name, cells in (("start", self.starts), ("goal", self.goals)):
            if len(set(cells)) != len(cells):
                errs.append(f"{name}s are not distinct")
            for c in cells:
                if not (0 <= c[0] < self.h and 0 <= c[1] < self.w):
                    errs.append(f"{name} {c} is off the grid")
                elif c in self.holes:
                    errs.append(f"{name} {c} is a hole")
        return errs

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
    def from_dict(cls, d: dict[str, Any]) -> Instance:
        return cls(
            h=int(d["h"]), w=int(d["w"]),
            holes=frozenset(tuple(c) for c in d.get("holes", [])),
            starts=[tuple(c) for c in d["starts"]],
            goals=[tuple(c) for c in d["goals"]],
            optimal_plan=d.get("optimal_plan"),
            optimal_cost=d.get("optimal_cost"),
            needs_wait=d.get("needs_wait"),
            id=d.get("id"),
        )

    @classmethod
    def from_json(cls, s: str | dict[str, Any]) -> Instance:
        return cls.from_dict(json.loads(s) if isinstance(s, str) else s)


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
