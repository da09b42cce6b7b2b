"""The structured failure breakdown an eval reports and engineers read (``EvalReport.breakdown``).

One typed record for every testbed, with one section per way a testbed groups its results;
a testbed fills the sections that fit it and leaves the others empty:

* ``suites`` — check-based evals (e.g. plans checked step by step): per eval suite (e.g.
  ``"3agents"``), its aggregate ``SuiteResult`` (instances, valid rate = every check passed,
  optimal rate, failures per check, mean response tokens, mean cost ratio) and the same per
  bucket (e.g. grid size) in ``sizes``;
* ``buckets`` — evals that score answers into outcomes (reasoning_gym): per bucket of the
  testbed's ``BucketSpace``, ``OutcomeCounts`` (answers, fully correct ones, and a count per
  failure kind such as ``partial``, ``wrong``, ``no_answer``);
* ``rates`` — evals that report one rate per item of a group (the held-out testbed: per
  reasoning-gym dataset its mean score; per tool-use metric its value).

The on-disk form is the model's JSON dump. Breakdowns written before this record existed load
unchanged: a check-based dump is already this shape, a reasoning_gym ``{"buckets": {b: {"n", "correct",
"partial", ...}}}`` folds its flat counts into ``OutcomeCounts.failures``, and any other
top-level key whose value maps names to numbers (the held-out testbed's ``{"reasoning_gym":
{...}}`` and ``{"tools": {...}}``) is read as a ``rates`` group. Anything else is an error that
names the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

SECTIONS = ("suites", "buckets", "rates")
"""The breakdown's sections, in the order they are rendered."""


class SuiteCell(BaseModel):
    """Results of one eval suite on one bucket (e.g. one grid size), or aggregated over buckets."""

    model_config = ConfigDict(extra="forbid")

    n: int
    """Number of eval instances."""
    valid_rate: float
    """Share of responses passing every check."""
    optimal_rate: float
    """Share of responses that are valid and reach the optimal cost."""
    failures: dict[str, int]
    """Per check: number of responses failing it (every check the testbed runs is a key)."""
    mean_tokens: float
    """Mean response length in tokens."""
    mean_cost_ratio: float | None = None
    """Mean plan cost / optimal cost over valid responses (1.0 = all optimal; ``None`` if no valid
    response): how much longer the model's solutions are than necessary."""


class SuiteResult(SuiteCell):
    """One eval suite aggregated over its buckets, with the per-bucket table."""

    agents: int | None = None
    """The suite's agent count, for multi-agent testbeds; ``None`` otherwise."""
    sizes: dict[str, SuiteCell] = Field(default_factory=dict)
    """Per bucket (e.g. grid size ``"3x3"`` … ``"10x10"``), in the testbed's bucket order."""


class OutcomeCounts(BaseModel):
    """How the eval answers of one bucket ended."""

    model_config = ConfigDict(extra="forbid")

    n: int
    """Number of answers scored."""
    correct: int = 0
    """Answers scored fully correct."""
    failures: dict[str, int] = Field(default_factory=dict)
    """Per failure kind (e.g. ``partial``, ``wrong``, ``no_answer``): how many answers ended so."""

    @model_validator(mode="before")
    @classmethod
    def _fold_flat(cls, data: Any) -> Any:
        """Old flat form ``{"n", "correct", "<kind>": count, ...}`` → ``failures``."""
        if isinstance(data, Mapping) and "failures" not in data:
            known = {"n", "correct"}
            return {**{k: v for k, v in data.items() if k in known},
                    "failures": {k: v for k, v in data.items() if k not in known}}
        return data


class EvalBreakdown(BaseModel):
    """What ``EvalReport.breakdown`` holds: the testbed's failure breakdown (module docstring)."""

    model_config = ConfigDict(extra="forbid")

    suites: dict[str, SuiteResult] = Field(default_factory=dict)
    """Per eval suite (e.g. keyed ``"{k}agents"``): aggregate and per-bucket check results."""
    buckets: dict[str, OutcomeCounts] = Field(default_factory=dict)
    """Per bucket of the testbed's ``BucketSpace``: how its answers ended."""
    rates: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Per group (``"reasoning_gym"``, ``"tools"``): a rate or value per item of the group."""

    @model_validator(mode="before")
    @classmethod
    def _fold_groups(cls, data: Any) -> Any:
        """Old dumps keyed a rates group at the top level (``{"tools": {...}}``): move every key
        that is not a section, and maps names to numbers, into ``rates``."""
        if not isinstance(data, Mapping):
            return data
        extra = {k: v for k, v in data.items() if k not in SECTIONS}
        if not extra:
            return data
        for key, value in extra.items():
            if not (isinstance(value, Mapping)
                    and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value.values())):
                raise ValueError(f"breakdown key {key!r} is neither a section ({', '.join(SECTIONS)}) nor a "
                                 f"group of named rates (a mapping of names to numbers)")
        return {**{k: v for k, v in data.items() if k in SECTIONS},
                "rates": {**dict(data.get("rates") or {}), **extra}}

    def is_empty(self) -> bool:
        """No section has any entry (an eval that reported no breakdown)."""
        return not (self.suites or self.buckets or self.rates)

    def table(self) -> str:
        """Compact text table of ``suites`` (valid %, optimal %, failing checks per bucket)."""
        lines = []
        for name, s in self.suites.items():
            lines.append(f"{name}: valid {100 * s.valid_rate:.1f}%  optimal "
                         f"{100 * s.optimal_rate:.1f}%  n={s.n}  mean tokens {s.mean_tokens:.0f}")
            for size, b in s.sizes.items():
                fails = ", ".join(f"{c} {k}" for c, k in b.failures.items() if k)
                lines.append(f"  {size:<6} valid {100 * b.valid_rate:5.1f}%  optimal "
                             f"{100 * b.optimal_rate:5.1f}%  failures: {fails or 'none'}")
        return "\n".join(lines)

    def rates_by_bucket(self, key: str = "valid_rate") -> dict[str, float]:
        """Per bucket, ``key`` (``valid_rate`` or ``optimal_rate``) averaged over the suites that
        cover it, weighted by instance count (buckets with n > 0), in first-seen order."""
        totals: dict[str, list[float]] = {}
        for suite in self.suites.values():
            for bucket, cell in suite.sizes.items():
                if cell.n > 0:
                    acc = totals.setdefault(bucket, [0.0, 0.0])
                    acc[0] += cell.n * float(getattr(cell, key))
                    acc[1] += cell.n
        return {b: s / n for b, (s, n) in totals.items()}
