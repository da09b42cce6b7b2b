"""Run one environment program through reset and a list of actions, recording every result.

This is the library side of ``curriculum sandbox try``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from testbeds.spade.sandbox.config import Failure, SandboxConfig, SandboxFailure
from testbeds.spade.sandbox.pool import SandboxPool


class TrialReport(BaseModel):
    """Outcome of a trial: the first failure (if any) and every call that succeeded."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    """True when load, reset and every step succeeded."""
    error: Failure | None
    """The failure that stopped the trial."""
    steps: list[dict[str, Any]]
    """One record per successful call: ``{"call": "reset" | "step", ...result}``."""


def try_program(source: str, actions: Sequence[Any], *, config: SandboxConfig | None = None,
                seed: int | None = None, class_name: str | None = None,
                echo: Callable[[dict[str, Any]], None] | None = None) -> TrialReport:
    """Load ``source`` in a one-worker sandbox, reset it and step through ``actions``.

    ``echo`` is called with each record as it is produced (the CLI prints them).
    """
    config = (config or SandboxConfig()).model_copy(update={"workers": 1})
    steps: list[dict[str, Any]] = []

    def record(entry: dict[str, Any]) -> None:
        steps.append(entry)
        if echo:
            echo(entry)

    try:
        with SandboxPool(config) as pool, pool.load(source, class_name) as env:
            record({"call": "reset", **env.reset(seed).model_dump()})
            for action in actions:
                record({"call": "step", "action": action, **env.step(action).model_dump()})
    except SandboxFailure as exc:
        return TrialReport(ok=False, error=exc.failure, steps=steps)
    return TrialReport(ok=True, error=None, steps=steps)
