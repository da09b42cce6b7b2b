"""What one round costs in tokens, as a trainer states it from its config alone.

``--dry-run``'s wall-time estimate (``curriculum.walltime``) adds the testbed's evals
(``Testbed.eval_budget``), the engineer's model calls (``Engineer.design_budget``) and the
trainer's rollouts and training (``Trainer.training_budget``, a ``TrainingBudget``), each as a
``Work``: generated tokens, sequential decode steps, prefilled tokens and trained tokens.

``generate_work(rows, tokens, batch)``: ``rows`` prompts answered in generate calls of up to
``batch`` rows, each up to ``tokens`` new tokens; every call decodes ``tokens`` steps, whatever its
rows, and prefills ``PROMPT_TOKENS`` per prompt unless told otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

PROMPT_TOKENS = 400
"""Assumed prompt length of one training or eval task (a grid-world prompt of a mid-sized grid)."""
WARMSTART_FILL = 0.43
"""Tokens of one warm-start example over PROMPT_TOKENS + trainer.max_completion_length (a
reference answer is shorter than the completion limit, a prompt often shorter than PROMPT_TOKENS):
the mean of the two CPU demos' measured ratios. The path-finding demo: ~244 / (400 + 128) = 0.46;
the self-play games demo: 48 design examples of ~826 tokens and 96 agent moves of ~133 (token
counts of its warm start on the long library games), 364 / (400 + 512) = 0.40 (docs/results.md)."""


@dataclass(frozen=True)
class Work:
    """Token counts of one stage (module docstring)."""

    generated: int = 0
    decode_steps: int = 0
    prefilled: int = 0
    trained: int = 0

    def __add__(self, other: Work) -> Work:
        return Work(self.generated + other.generated, self.decode_steps + other.decode_steps,
                    self.prefilled + other.prefilled, self.trained + other.trained)

    def times(self, k: int) -> Work:
        return Work(k * self.generated, k * self.decode_steps, k * self.prefilled, k * self.trained)


def generate_work(rows: int, tokens: int, batch: int, prompt_tokens: int = PROMPT_TOKENS) -> Work:
    """``rows`` prompts answered in generate calls of up to ``batch`` rows, each up to ``tokens``
    new tokens: every call decodes ``tokens`` steps, whatever its rows."""
    if rows <= 0 or tokens <= 0:
        return Work()
    return Work(generated=rows * tokens, decode_steps=math.ceil(rows / max(batch, 1)) * tokens,
                prefilled=rows * prompt_tokens)


@dataclass(frozen=True)
class OwnSeconds:
    """Seconds a trainer states itself where token counts do not price it: a model so small that
    its steps are bound by per-call and per-row overhead rather than by FLOPs or weight bytes (the
    small learner, ``trainers/small/cost.py``), priced by rates it measured."""

    round: float
    """One round's rollouts, scoring and updates."""
    eval: float
    """One eval of the validation suite."""
    test_eval: float = 0.0
    """One eval of the test suite (0 where the testbed has none)."""
    warmstart: float = 0.0
    """The supervised warm start (skipped when cached)."""
    overhead: float = 0.0
    """Per round besides the trainer's work: drawing and solving the round's tasks, committing."""
    setup: float = 0.0
    """Once per run: importing, building the plugins and the model."""


@dataclass(frozen=True)
class PaddedTraining:
    """How a trainer's training pass computes its counted rows (``Trainer.central_training``), for
    ``--dry-run``'s central estimate: every row of a step padded to the step's longest completion,
    and only some rows running a backward pass."""

    longest_completion: float
    """A step's longest completion per completion limit (every row is padded to it)."""
    kept_rows: float = 1.0
    """Share of the rows that run a backward pass."""


@dataclass(frozen=True)
class TrainingBudget:
    """What a trainer's round costs, from the config alone (``Trainer.training_budget``).

    The default is a trainer without a model (the simulated learner): nothing trained, and the
    estimate falls back to a fixed time per round."""

    trains_model: bool = False
    """A model is trained (and its size sets the seconds); ``False``: a fixed time per round."""
    round: Work = field(default_factory=Work)
    """One round's rollouts and training."""
    warmstart: Work = field(default_factory=Work)
    """The supervised warm start, once before round 0 (skipped when cached)."""
    reference_model: bool = False
    """A frozen reference model runs a forward pass on every trained token (KL, ``beta > 0``)."""
    evals_before_training: int = 1
    """Evals before round 0 when the run sets ``eval_before_training`` (2: again after a warm start)."""
    optimizer_steps_per_round: int | None = None
    """Optimizer steps one round takes when the trainer fixes them whatever its prompt settings
    (self-play: one update per rollout step); ``None``: counted from its prompt batches, if any
    (``curriculum.compare.steps_per_run``)."""
    own_seconds: OwnSeconds | None = None
    """Seconds the trainer states itself (``OwnSeconds``) instead of token counts; ``trains_model``
    stays ``False`` (no model for the token model to price)."""
