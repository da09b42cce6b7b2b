"""Plain data records of a run: what happened in a round, as engineers and reports read it.

History is a list of ``RoundReport``; engineers derive their decisions from it, so they keep
little state of their own and resume cleanly.

A round is evaluated on two disjoint held-out suites (``testbeds.base``): ``eval`` is the
**validation** suite, which engineers read, and ``test`` the **test** suite, which reports,
``compare`` and the demo score on. Engineers get ``engineer_view()`` of every round (``test``
removed; ``engineers.base.DesignContext`` applies it), so no test result reaches them.
``scored()`` is what every reader that reports a score uses: the test eval, or for a round
without one (a run written before suites were split, or a testbed with one held-out suite)
the validation eval, with the suite named in ``scored_suite()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, model_validator

from curriculum.core.pool import EnvOutcome
from curriculum.core.types import Change, EvalReport


def _plain(value: Any) -> Any:
    """Tuples as lists and numpy scalars as Python numbers, recursively (everything else as is,
    for ``JsonValue`` to accept or name)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return value


Diagnostics = Annotated[dict[str, JsonValue], BeforeValidator(_plain)]
"""An engineer's per-round diagnostics: named readings (a count, a rate, a list of buckets, a
short text), each a JSON value, that ``curriculum show`` and ``compare`` print beside the design
(edit granularity, frontier movement, admitted environments...). Which names an engineer
reports is its own; the record only guarantees they are named JSON values."""


class Design(BaseModel):
    """What an engineer returns from ``design``: a raw proposal plus what it saw and said."""

    model_config = ConfigDict(extra="forbid")

    raw: Any
    """The proposal as the engineer produced it (any JSON value; ``project`` legalises it)."""
    prompt: str | None = None
    """The full input the engineer's model read, if it used one."""
    output: str | None = None
    """The engineer model's raw text output, if any."""
    diagnostics: Diagnostics = Field(default_factory=dict)
    """What the engineer reports about this design (``Diagnostics``); the loop stores it on the
    round's ``DesignRecord``."""
    notes: dict[str, Any] = Field(default_factory=dict)
    """Genuinely free-form engineer extras for inspection (parsed summary, trial number, the
    engineer's own state...); nothing outside the engineer reads a key of it."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_diagnostics(cls, data: Any) -> Any:
        """Designs written before ``diagnostics`` was a field kept them as ``notes["diagnostics"]``."""
        if isinstance(data, Mapping) and "diagnostics" not in data:
            notes = data.get("notes")
            if isinstance(notes, Mapping) and isinstance(notes.get("diagnostics"), Mapping):
                rest = {k: v for k, v in notes.items() if k != "diagnostics"}
                return {**data, "notes": rest, "diagnostics": notes["diagnostics"]}
        return data


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
    diagnostics: Diagnostics = Field(default_factory=dict)
    """Per-round diagnostics (``Design.diagnostics``: edit granularity, frontier movement...)."""


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
    """Evaluation of the policy after this round's training on the **validation** suite (what
    engineers read; in run dirs written before suites were split, the one eval suite)."""
    test: EvalReport | None = None
    """The same policy on the **test** suite (what reports and ``compare`` score on); ``None``
    in the engineers' view, for testbeds with one held-out suite, for rounds the run did not
    test (``test_every_round: false``) and in run dirs written before suites were split."""
    env_outcomes: list[EnvOutcome] = Field(default_factory=list)
    """What the trainer measured per environment it played this round (regret and win rates,
    ``curriculum.core.pool.EnvOutcome``), from ``Trainer.env_outcomes()``; empty for trainers
    that play no environments."""
    design: DesignRecord | None = None
    """The engineer's design for the next round (``None`` after the last round)."""

    def engineer_view(self) -> RoundReport:
        """This round as engineers may see it: everything but the test suite's results."""
        return self.model_copy(update={"test": None})

    def scored(self) -> EvalReport:
        """The eval reports score on: the test suite's when the round has one, else ``eval``."""
        return self.test if self.test is not None else self.eval

    def scored_suite(self) -> str:
        """Name of the suite ``scored()`` is on (``suite_label``)."""
        return suite_label(self.scored())


LEGACY_SUITE = "eval (one suite: validation = test)"
"""How a report written before suites were split is labelled: its one eval suite was read by
engineers and reported, so it is both (and held no content deduplication)."""


def suite_label(report: EvalReport) -> str:
    """``"test"``, ``"validation"`` or ``LEGACY_SUITE`` for an eval without a suite name."""
    return report.suite or LEGACY_SUITE
