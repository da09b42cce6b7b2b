"""Plain data records of a run: what happened in a round, as engineers and reports read it.

History is a list of ``RoundReport``; engineers derive their decisions from it, so they keep
little state of their own and resume cleanly.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from curriculum.core.pool import EnvOutcome
from curriculum.core.types import Change, EvalReport


class Design(BaseModel):
    """What an engineer returns from ``design``: a raw proposal plus what it saw and said."""

    model_config = ConfigDict(extra="forbid")

    raw: Any
    """The proposal as the engineer produced it (any JSON value; ``project`` legalises it)."""
    prompt: str | None = None
    """The full input the engineer's model read, if it used one."""
    output: str | None = None
    """The engineer model's raw text output, if any."""
    notes: dict[str, Any] = Field(default_factory=dict)
    """Engineer-specific extras (parsed summary, trial number, diagnostics...)."""


class DesignRecord(BaseModel):
    """A design after ``project``: stored per round and shown by ``curriculum show``."""

    model_config = ConfigDict(extra="forbid")

    engineer: str
    """Registry name of the engineer."""
    design: Design
    """What the engineer returned."""
    projected: dict[str, Any]
    """The legal proposal that the next round uses."""
    changes: list[Change]
    """Every edit ``project`` made to the raw proposal."""
    diagnostics: dict[str, Any] = Field(default_factory=dict)
    """Per-round diagnostics (edit granularity, frontier movement...)."""


class RoundReport(BaseModel):
    """Everything about one completed round."""

    model_config = ConfigDict(extra="forbid")

    round: int
    """Round index, from 0."""
    proposal: dict[str, Any]
    """The proposal this round trained on."""
    train_metrics: dict[str, float]
    """Aggregated training metrics (mean reward, loss, steps, seconds...)."""
    eval: EvalReport
    """Evaluation of the policy after this round's training."""
    env_outcomes: list[EnvOutcome] = Field(default_factory=list)
    """What the trainer measured per environment it played this round (SPADE's regret and win
    rates), from ``Trainer.env_outcomes()``; empty for trainers that play no environments."""
    design: DesignRecord | None = None
    """The engineer's design for the next round (``None`` after the last round)."""
