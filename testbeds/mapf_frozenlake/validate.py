"""The eight validity checks of a MAPF-FrozenLake answer (Trainee-to-Trainer paper), each reported apart.

| check          | passes when                                                              |
|----------------|--------------------------------------------------------------------------|
| parsable       | at least one path could be extracted (``parse.parse_plan``)              |
| legal_move     | every step of every path moves Manhattan distance ≤ 1 (wait = 0)         |
| conflict_free  | no two agents share a cell at a time (paths padded with their last cell: |
|                | an agent rests on its final cell), and no two agents swap cells          |
| goal_reached   | every parsed agent that has a goal ends on it                            |
| start_correct  | every parsed agent that has a start begins on it                         |
| agent_count    | the parsed agents are exactly the instance's agents 1..k (count *and*    |
|                | labels: ``Agent 1``/``Agent 3`` for 2 agents fails; an unlabeled path   |
|                | beside labeled ones or a label repeated fails; nothing is repaired)      |
| hole_free      | no in-bounds cell of any path is a hole                                  |
| in_bounds      | every cell of every path lies on the grid                                |

The checks are independent by construction (a hole check ignores off-grid cells, a goal check
covers only agents that were parsed, …), so a plan with one kind of defect fails exactly one
check. When the text is not parsable the other seven are ``None`` (not evaluated).

Cost: sum over agents of the time of the last arrival at the goal (only for valid plans);
``optimal`` = valid and cost == the instance's optimal cost. ``validate`` never raises.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any

from testbeds.mapf_frozenlake.instance import Instance, plan_cost
from testbeds.mapf_frozenlake.parse import ParseResult, parse_plan

def _legal_steps(lo: int = -2, hi: int = 40) -> frozenset:
    """All (cell, cell) pairs at Manhattan distance ≤ 1 with coordinates in [lo, hi): a lookup
    table that lets ``validate`` check every move of a plan with one set inclusion."""
    out = set()
    for r in range(lo, hi):
        for c in range(lo, hi):
            for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
                out.add(((r, c), (r + dr, c + dc)))
    return frozenset(out)


_LEGAL_STEPS = _legal_steps()
_eq = operator.eq


def _explain_cells(paths, h, w, holes, reasons, ok_legal, ok_bounds, ok_holes) -> None:
    """First offending cell or move for each failed per-cell check."""
    for i, p in enumerate(paths):
        for t, (r, c) in enumerate(p):
            if not ok_bounds and "in_bounds" not in reasons and not (0 <= r < h and 0 <= c < w):
                reasons["in_bounds"] = f"agent {i + 1} is off the grid at t={t}: ({r},{c})"
            if not ok_holes and "hole_free" not in reasons and (r, c) in holes:
                reasons["hole_free"] = f"agent {i + 1} enters hole ({r},{c}) at t={t}"
            if t and not ok_legal and "legal_move" not in reasons:
                a, b = p[t - 1]
                if abs(r - a) + abs(c - b) > 1:
                    reasons["legal_move"] = (f"agent {i + 1} jumps from ({a},{b}) to ({r},{c}) "
                                             f"at t={t}")


CHECKS: tuple[str, ...] = ("parsable", "legal_move", "conflict_free", "goal_reached",
                           "start_correct", "agent_count", "hole_free", "in_bounds")
"""The eight checks, in the order of the Trainee-to-Trainer paper."""


@dataclass
class Verdict:
    """Outcome of ``validate``."""

    valid: bool
    """All eight checks pass."""
    checks: dict[str, bool | None]
    """Per check: passed, failed, or ``None`` (not evaluated because unparsable)."""
    reasons: dict[str, str] = field(default_factory=dict)
    """Per failed check: the first offending detail."""
    cost: int | None = None
    """Sum of costs of the plan (valid plans only)."""
    optimal_cost: int | None = None
    """The instance's optimal cost, if known."""
    optimal: bool = False
    """Valid and ``cost == optimal_cost``."""
    num_paths: int = 0
    """Number of parsed agent paths."""
    format: str = ""
    """Parse format that matched."""

    @property
    def failed(self) -> list[str]:
        return [c for c in CHECKS if self.checks.get(c) is False]

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "checks": dict(self.checks), "reasons": dict(self.reasons),
                "cost": self.cost, "optimal_cost": self.optimal_cost, "optimal": self.optimal,
                "num_paths": self.num_paths, "format": self.format}


def _count_reason(stated: list[int], k: int, extra: int = 0, repeated: Sequence[int] = ()) -> str:
    """Why the stated agents are not exactly agents 1..k (numbers as the prompt writes them)."""
    if repeated:
        return (f"agent{'s' if len(repeated) > 1 else ''} {', '.join(str(a + 1) for a in repeated)} "
                f"labeled with a path more than once")
    if extra:
        return (f"{len(stated)} labeled and {extra} unlabeled path{'s' if extra > 1 else ''} "
                f"for {k} agents")
    if len(stated) != k:
        return f"{len(stated)} paths for {k} agents"
    return (f"the response names agents {', '.join(str(a + 1) for a in sorted(stated))}; "
            f"the instance has agents 1..{k}")


def validate(instance: Instance, text_or_parsed: str | ParseResult | list) -> Verdict:
    """Run the eight checks on a response text, a ``ParseResult`` or a list of paths."""
    try:
        return _validate(instance, text_or_parsed)
    except Exception as exc:  # pragma: no cover - defensive; fuzz tests keep this unused
        checks = {c: None for c in CHECKS}
        checks["parsable"] = False
        return Verdict(False, checks, {"parsable": f"internal error: {type(exc).__name__}"},
                       optimal_cost=instance.optimal_cost)


def _validate(inst: Instance, x: Any) -> Verdict:
    pr = _as_parsed(inst, x)
    if not pr.ok or not pr.paths or not all(pr.paths):
        checks: dict[str, bool | None] = {c: None for c in CHECKS}
        checks["parsable"] = False
        return Verdict(False, checks, {"parsable": pr.error or "no paths"},
                       optimal_cost=inst.optimal_cost, format=pr.format)

    paths = pr.paths
    k = inst.num_agents
    reasons: dict[str, str] = {}
    ok_legal, ok_bounds, ok_holes = _cell_checks(inst, paths, reasons)
    agents = pr.agents if pr.agents is not None else list(range(len(paths)))
    ok_start, ok_goal = _end_checks(inst, paths, agents, reasons)
    stated = pr.stated_agents()
    ok_count = sorted(stated) == list(range(k)) and not pr.extra and not pr.repeated
    if not ok_count:
        reasons["agent_count"] = _count_reason(stated, k, pr.extra, pr.repeated)
    ok_conf = _conflict_free(paths, reasons)

    checks = {"parsable": True, "legal_move": ok_legal, "conflict_free": ok_conf,
              "goal_reached": ok_goal, "start_correct": ok_start, "agent_count": ok_count,
              "hole_free": ok_holes, "in_bounds": ok_bounds}
    valid = ok_legal and ok_conf and ok_goal and ok_start and ok_count and ok_holes and ok_bounds
    cost = plan_cost(paths, inst.goals) if valid else None
    optimal = valid and inst.optimal_cost is not None and cost == inst.optimal_cost
    return Verdict(valid, checks, reasons, cost, inst.optimal_cost, optimal, len(paths), pr.format)


def _as_parsed(inst: Instance, x: Any) -> ParseResult:
    """A response text, a ``ParseResult`` or a list of paths, as a ``ParseResult``."""
    if isinstance(x, ParseResult):
        return x
    if isinstance(x, str):
        return parse_plan(x, inst.num_agents, inst.starts)
    if isinstance(x, (list, tuple)):
        try:
            paths = [[(int(c[0]), int(c[1])) for c in p] for p in x]
        except (TypeError, ValueError, IndexError, KeyError):
            return ParseResult(False, error="not a list of paths of (r, c)")
        return ParseResult(bool(paths) and all(paths), paths, "paths",
                           "" if paths and all(paths) else "empty path")
    return ParseResult(False, error=f"cannot validate a {type(x).__name__}")


def _cell_checks(inst: Instance, paths: list, reasons: dict[str, str]) -> tuple[bool, bool, bool]:
    """``(legal_move, in_bounds, hole_free)``; the first offence of each failed one in ``reasons``.

    Fast paths run at C speed on sets; the slow loops (``_explain_cells``) only run to find the
    reason."""
    ok_legal = ok_bounds = ok_holes = True
    cells = set().union(*paths)
    h, w, holes = inst.h, inst.w, inst.holes
    if not all(0 <= r < h and 0 <= c < w for r, c in cells):
        ok_bounds = False
    if not holes.isdisjoint(cells):
        ok_holes = False
    steps = set()
    for p in paths:
        steps.update(zip(p, p[1:]))
    if not steps <= _LEGAL_STEPS:
        ok_legal = not any(abs(a[0] - b[0]) + abs(a[1] - b[1]) > 1 for a, b in steps)
    if not (ok_bounds and ok_holes and ok_legal):
        _explain_cells(paths, h, w, holes, reasons, ok_legal, ok_bounds, ok_holes)
    return ok_legal, ok_bounds, ok_holes


def _end_checks(inst: Instance, paths: list, agents: list[int], reasons: dict[str, str]) -> tuple[bool, bool]:
    """``(start_correct, goal_reached)`` over the parsed agents the instance has."""
    k = inst.num_agents
    ok_start = True
    ok_goal = True
    for p, i in zip(paths, agents):
        if not 0 <= i < k:
            continue  # an agent the instance does not have: Agent-count fails, not these
        if ok_start and p[0] != inst.starts[i]:
            ok_start = False
            reasons["start_correct"] = f"agent {i + 1} starts at {p[0]}, not {inst.starts[i]}"
        if ok_goal and p[-1] != inst.goals[i]:
            ok_goal = False
            reasons["goal_reached"] = f"agent {i + 1} ends at {p[-1]}, not its goal {inst.goals[i]}"
    return ok_start, ok_goal


def _conflict_free(paths: list, reasons: dict[str, str]) -> bool:
    """No vertex conflict (paths padded with their last cell) and no swap; the first conflict of
    the first pair in ``reasons`` otherwise."""
    n = len(paths)
    if n <= 1:
        return True
    T = max(len(p) for p in paths)
    padded = [p + [p[-1]] * (T - len(p)) if len(p) < T else p for p in paths]
    for i in range(n):
        p = padded[i]
        for j in range(i + 1, n):
            q = padded[j]
            if any(map(_eq, p, q)):
                t = next(t for t in range(T) if p[t] == q[t])
                reasons["conflict_free"] = f"agents {i + 1} and {j + 1} both at {p[t]} at t={t}"
                return False
            if any(map(_eq, p[1:], q[:-1])):
                swaps = [t for t in range(1, T) if p[t] == q[t - 1] and q[t] == p[t - 1]]
                if swaps:
                    t = swaps[0]
                    reasons["conflict_free"] = (f"agents {i + 1} and {j + 1} swap "
                                                f"{p[t - 1]}<->{p[t]} at t={t}")
                    return False
    return True
