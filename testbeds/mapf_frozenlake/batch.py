"""Record-by-record batch operations behind ``curriculum mapf`` (JSON values in, JSON dicts out).

* ``solve_record``: an instance object → ``{"line", "id", "status", "cost", "plan"}``.
* ``validate_record``: ``{"instance": {...}, "response": "...", "num_tokens": optional}`` →
  ``{"line", "id", "valid", "checks", "reasons", "cost", "optimal_cost", "optimal", "reward",
  "num_tokens", "token_unit"}``. The instance's optimal cost is taken from the record, or computed
  with the solver when absent. The reward uses the cold-start adaptive weights (EMA 0 → 0.5/0.5)
  and ``num_tokens``: the record's own (``token_unit: "given"``), else ``count_tokens(response)``
  (the CLI passes a tokenizer's count; ``token_unit`` names it), else whitespace-separated words
  (``token_unit: "words"``) — the length thresholds (1500, 4096) are meant in tokens.

A record that cannot be used — not an object, a missing or malformed field, an invalid instance
(``instance.instance_problems``) — gives ``{"line", "id", "error": reason}`` (``solve_record``
adds ``"status": "error"``) instead of raising; ``error_result`` builds the same shape for
lines that could not even be read. Every output has ``"line"`` (the 1-based input line, or
``None`` for values passed in directly) so outputs can be joined back to inputs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from testbeds.mapf_frozenlake.instance import Instance, InvalidInstance
from testbeds.mapf_frozenlake.reward import AdaptiveReward
from testbeds.mapf_frozenlake.solver import solve
from testbeds.mapf_frozenlake.validate import validate


class BadRecord(ValueError):
    """A record that is not a usable input (the message is the reason)."""


def _object(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise BadRecord(f"bad JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise BadRecord(f"a line must be a JSON object (got {type(value).__name__})")
    return value


def _id(value: Any) -> Any:
    return value.get("id") if isinstance(value, dict) else None


def error_result(reason: str, *, line: int | None = None, record_id: Any = None,
                 solve: bool = False) -> dict[str, Any]:
    """The output for a record that produced no result."""
    out: dict[str, Any] = {"line": line, "id": record_id}
    if solve:
        out.update(status="error", cost=None, plan=None)
    out["error"] = reason
    return out


def solve_record(value: Any, *, line: int | None = None, time_budget_s: float = 10.0,
                 node_budget: int = 100_000) -> dict[str, Any]:
    """Solve one instance record (a dict or its JSON text)."""
    try:
        inst = Instance.from_dict(_object(value))
    except (BadRecord, InvalidInstance) as exc:
        return error_result(str(exc), line=line, record_id=_id(value), solve=True)
    r = solve(inst, time_budget_s=time_budget_s, node_budget=node_budget)
    return {"line": line, "id": inst.id, "status": r.status, "cost": r.cost,
            "plan": [[list(c) for c in p] for p in r.plan] if r.plan is not None else None}


def words(text: str) -> int:
    """Whitespace-separated words: the token count when no tokenizer is given."""
    return len(text.split())


def _validate_inputs(obj: dict[str, Any], count_tokens: Callable[[str], int],
                     token_unit: str) -> tuple[Instance, str, int, str]:
    if "instance" not in obj:
        raise BadRecord("missing field 'instance'")
    inst = Instance.from_dict(obj["instance"])
    response = obj.get("response", "")
    if not isinstance(response, str):
        response = json.dumps(response)
    if "num_tokens" not in obj:
        return inst, response, count_tokens(response), token_unit
    num_tokens = obj["num_tokens"]
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 0:
        raise BadRecord(f"'num_tokens' must be a non-negative integer (got {num_tokens!r:.40})")
    return inst, response, num_tokens, "given"


def validate_record(value: Any, *, line: int | None = None, reward: AdaptiveReward | None = None,
                    time_budget_s: float = 10.0, count_tokens: Callable[[str], int] = words,
                    token_unit: str = "words") -> dict[str, Any]:
    """Run the eight checks and the reward on one ``{instance, response}`` record."""
    try:
        obj = _object(value)
        inst, response, num_tokens, unit = _validate_inputs(obj, count_tokens, token_unit)
    except (BadRecord, InvalidInstance) as exc:
        return error_result(str(exc), line=line, record_id=_id(value))
    if inst.optimal_cost is None:
        r = solve(inst, time_budget_s=time_budget_s)
        if r.status == "solved":
            inst.optimal_cost = r.cost
    v = validate(inst, response)
    rw = (reward or AdaptiveReward())(v, num_tokens)
    out = {"line": line, "id": obj.get("id", inst.id)}
    out.update(v.to_dict())
    out.update(reward=rw, num_tokens=num_tokens, token_unit=unit)
    return out
