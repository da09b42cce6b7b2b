"""Test doubles: a Policy with canned outputs, and the checkpoint engineer wired to it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from curriculum.core.breakdown import EvalBreakdown
from curriculum.core.types import Completion, Policy, Task
from engineers.base import DesignContext
from engineers.checkpoint.config import CheckpointEngineerConfig
from engineers.checkpoint.engineer import CheckpointEngineer


class ScriptedPolicy:
    """Answers the i-th ``generate`` call with ``outputs[i]`` (the last one repeats)."""

    def __init__(self, outputs: Sequence[str]) -> None:
        self.outputs = list(outputs)
        self.calls: list[dict[str, Any]] = []

    def generate(self, tasks: Sequence[Task], *, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int = 0) -> list[Completion]:
        text = self.outputs[min(len(self.calls), len(self.outputs) - 1)]
        self.calls.append({"tasks": list(tasks), "max_new_tokens": max_new_tokens,
                           "temperature": temperature, "seed": seed})
        return [Completion(text=text, num_tokens=len(text.split())) for _ in tasks]


class ScriptedCheckpointConfig(CheckpointEngineerConfig):
    """The checkpoint engineer's config plus the canned outputs."""

    name: Literal["checkpoint_scripted"] = "checkpoint_scripted"  # type: ignore[assignment]
    """Selects the scripted variant."""
    outputs: list[str] = ['The 3x3 maps are solved.\n```json\n{"summary": "more 5x5", "sizes": {"5x5": '
                          '{"data_ratio": 0.4, "hole_ratio": 0.1, "wait_ratio": 0.2}}}\n```']
    """What the fake engineer model answers, call by call (the default is one canned answer, so the
    shared engineer contract suite can build it from ``{"name": ...}`` alone)."""


class ScriptedCheckpointEngineer(CheckpointEngineer):
    """``CheckpointEngineer`` whose engineer model is a ``ScriptedPolicy``."""

    def __init__(self, config: ScriptedCheckpointConfig, *, run_dir: str | None = None) -> None:
        super().__init__(config, run_dir=run_dir)
        self.fake = ScriptedPolicy(config.outputs)

    @classmethod
    def trainer_problem(cls, config, trainer):
        return None  # its engineer model is the script, whatever the trainer's policy writes

    def engineer_policy(self, ctx: DesignContext) -> Policy:
        return self.fake


# -- fixed inputs ---------------------------------------------------------------------------------

CHECKS = ("parsable", "legal_move", "conflict_free", "goal_reached", "start_correct", "agent_count",
          "hole_free", "in_bounds")
VALID = {"3x3": 1.0, "4x4": 0.9, "5x5": 0.6, "6x6": 0.3, "7x7": 0.1, "8x8": 0.0, "9x9": 0.0, "10x10": 0.0}


def fixed_breakdown(valid: dict[str, float] | None = None, n: int = 10) -> EvalBreakdown:
    """An ``EvalBreakdown`` with one 3-agent suite, ``n`` instances per size; failing responses
    fail ``conflict_free`` (and at 8x8 and larger also ``hole_free``); optimal = valid / 2."""
    valid = valid or VALID
    sizes = {}
    for size, rate in valid.items():
        bad = round(n * (1 - rate))
        failures = {c: 0 for c in CHECKS}
        failures["conflict_free"] = bad
        if int(size.split("x")[0]) >= 8:
            failures["hole_free"] = bad
        sizes[size] = {"n": n, "valid_rate": rate, "optimal_rate": rate / 2, "failures": failures,
                       "mean_tokens": 80.0}
    total = sum(v for v in valid.values()) / len(valid)
    suite = {"agents": 3, "n": n * len(valid), "valid_rate": total, "optimal_rate": total / 2,
             "failures": {c: sum(s["failures"][c] for s in sizes.values()) for c in CHECKS},
             "mean_tokens": 80.0, "sizes": sizes}
    return EvalBreakdown.model_validate({"suites": {"3agents": suite}})


def config_json(data: list[float], hole: float = 0.2, wait: float = 0.0) -> dict[str, Any]:
    from testbeds.mapf_frozenlake.config import SIZES

    return {"sizes": {s: {"data_ratio": d, "hole_ratio": hole, "wait_ratio": wait} for s, d in zip(SIZES, data)}}


def answer(config: dict[str, Any], summary: str = "More data at 6x6 where I fail half the time.",
           reasoning: str = "6x6 is at my frontier.") -> str:
    """A well-formed engineer answer: prose, then a fenced JSON block."""
    import json

    return f"{reasoning}\n```json\n{json.dumps({'summary': summary, **config})}\n```"
