"""Line-by-line batch operations behind ``curriculum mapf`` (JSONL in, JSON dicts out).

* ``solve_line``: an instance line → ``{"id", "status", "cost", "plan"}``.
* ``validate_line``: ``{"instance": {...}, "response": "...", "num_tokens": optional}`` →
  ``{"id", "valid", "checks", "reasons", "cost", "optimal_cost", "optimal", "reward"}``. The
  instance's optimal cost is taken from the line, or computed with the solver when absent. The
  reward uses the cold-start adaptive weights (EMA 0 → 0.5/0.5) and ``num_tokens`` (default:
  whitespace-separated words of the response, a rough stand-in for a tokenizer).

Malformed lines produce ``{"error": ...}`` instead of raising.
"""

from __future__ import annotations

import json
from typing import Any

from testbeds.mapf_frozenlake.instance import Instance
from testbeds.mapf_frozenlake.reward import AdaptiveReward
from testbeds.mapf_frozenlake.solver import solve
from testbeds.mapf_frozenlake.validate import validate


def _load(line: str | dict) -> dict[str, Any]:
    obj = json.loads(line) if isinstance(line, str) else line
    if not isinstance(obj, dict):
        raise ValueError("line is not a JSON object")
    return obj


def solve_line(line: str | dict, *, time_budget_s: float = 10.0,
               node_budget: int = 100_000) -> dict[str, Any]:
    try:
        inst = Instance.from_dict(_load(line))
    except (ValueError, KeyError, TypeError) as exc:
        return {"id": None, "status": "error", "cost": None, "plan": None,
                "error": f"bad instance line: {exc}"}
    r = solve(inst, time_budget_s=time_budget_s, node_budget=node_budget)
    return {"id": inst.id, "status": r.status, "cost": r.cost,
            "plan": [[list(c) for c in p] for p in r.plan] if r.plan is not None else None}


def validate_line(line: str | dict, *, reward: AdaptiveReward | None = None,
                  time_budget_s: float = 10.0) -> dict[str, Any]:
    try:
        obj = _load(line)
        inst = Instance.from_dict(obj["instance"])
        response = obj.get("response", "")
        if not isinstance(response, str):
            response = json.dumps(response)
        num_tokens = int(obj.get("num_tokens", len(response.split())))
    except (ValueError, KeyError, TypeError) as exc:
        return {"id": None, "error": f"bad line: {exc}"}
    if inst.optimal_cost is None:
        r = solve(inst, time_budget_s=time_budget_s)
        if r.status == "solved":
            inst.optimal_cost = r.cost
    v = validate(inst, response)
    rw = (reward or AdaptiveReward())(v, num_tokens)
    out = {"id": obj.get("id", inst.id)}
    out.update(v.to_dict())
    out.update(reward=rw, num_tokens=num_tokens)
    return out
