"""The data that crosses every layer: tasks, completions, policies, eval reports, proposal edits.

A testbed turns a proposal into ``Task``s and scores ``Completion``s; a ``Policy`` answers tasks;
``EvalReport`` is what evaluation returns and engineers read; ``Change`` is one edit a testbed's
``project`` made to an engineer's raw proposal. All are plain JSON, so run directories stay
readable and resumable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from curriculum.core.breakdown import EvalBreakdown


class Task(BaseModel):
    """One prompt the policy answers, with everything needed to score the answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    """Stable identifier, unique within a round or eval suite."""
    messages: list[dict[str, str]]
    """The chat prompt (``[{"role": ..., "content": ...}, ...]``)."""
    data: dict[str, Any] = Field(default_factory=dict)
    """Testbed-specific payload used for scoring (e.g. a planning instance and its optimal plan)."""
    features: dict[str, Any] = Field(default_factory=dict)
    """Descriptive features used in reports and by simulated learners (size, agents, ...)."""


class Completion(BaseModel):
    """A policy's answer to one task."""

    model_config = ConfigDict(extra="forbid")

    text: str
    """The decoded completion."""
    num_tokens: int
    """Number of completion tokens under the policy's tokenizer."""


class Policy(Protocol):
    """Anything that answers tasks: a language model, or a simulated learner."""

    def generate(self, tasks: Sequence[Task], *, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int = 0) -> list[Completion]:
        """One completion per task, in order."""
        ...


class Change(BaseModel):
    """One edit ``project`` made to an engineer's raw proposal."""

    model_config = ConfigDict(extra="forbid")

    path: str
    """Dotted location of the value, e.g. ``sizes.5.hole_ratio``."""
    proposed: Any
    """What the engineer proposed (``None`` when it was missing)."""
    applied: Any
    """What was applied instead."""
    reason: str
    """Why: clipped into bounds, renormalised, filled from previous config, unparsable..."""


class EvalReport(BaseModel):
    """The result of evaluating a policy on a testbed's eval suites."""

    model_config = ConfigDict(extra="forbid")

    score: float
    """The single scalar engineers and benchmarks optimise (testbed-defined; higher is better)."""
    metrics: dict[str, float]
    """Flat aggregate metrics, e.g. ``{"valid_rate/3agents": 0.4, "optimal_rate/3agents/5x5": 0.3}``;
    each name is a ``curriculum.core.metrics.MetricKey``'s ``to_str``."""
    breakdown: EvalBreakdown = Field(default_factory=EvalBreakdown)
    """Structured failure breakdown (per suite and bucket, per bucket's outcomes, or per group of
    rates; ``curriculum.core.breakdown``) that engineers read."""
    bucket_scores: dict[str, float] = Field(default_factory=dict)
    """Success rate in [0, 1] per bucket of the testbed's ``BucketSpace`` (buckets the eval did not
    cover are absent): what bucket-editing engineers read (``curriculum.core.spaces``)."""
    samples: list[dict[str, Any]] = Field(default_factory=list)
    """A few (prompt, response, verdict) examples for inspection."""
    task_scores: dict[str, float] = Field(default_factory=dict)
    """Each eval task's own result in [0, 1], by task id (e.g. 1 for a valid plan, 0 otherwise).
    Two evals that share task ids compare task by task (``curriculum eval --against``: gained,
    lost, a paired interval), which separates a change from instance-to-instance noise far better
    than two pooled rates."""
    suite: str | None = None
    """Which held-out suite this is: ``"validation"`` (engineers read it) or ``"test"`` (reports
    and ``compare`` score on it; engineers never see it). ``None``: written before runs had two
    suites, when the one eval suite was both read by engineers and reported."""
