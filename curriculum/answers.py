"""How often an engineer's model answered, and how often it answered with the prompt's example.

Engineers that ask a model record per round, in their design's ``diagnostics``, ``answers`` (the
model's answers that round, one per attempt) and ``copied_example`` (how many of them were the
example the prompt showed, i.e. nothing designed; the checkpoint engineer). ``answer_counts``
sums both over a run directory's completed rounds for reports; ``answer_totals`` sums the pairs
a caller already read (``compare``, from ``RunSummary.answers``). Rounds written before
``answers`` was recorded count their ``attempts`` (and a ``copied_example`` flag as one copy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curriculum.rundir import RunDir


def answer_counts(run_dir: str | Path) -> dict[str, int]:
    """``{"answers": n, "copied_example": m, "rounds": k}`` over the run's completed rounds:
    ``k`` rounds whose engineer asked a model, ``n`` answers it gave, ``m`` of them the prompt's
    example. All zero for an engineer that asks no model."""
    return answer_totals([round_answers(r.design.diagnostics if r.design else {})
                          for r in RunDir.open(run_dir).history()])


def answer_totals(per_round: list[tuple[int, int]]) -> dict[str, int]:
    """``answer_counts`` of per-round ``round_answers`` pairs already read (``RunSummary.answers``)."""
    return {"answers": sum(a for a, _ in per_round), "copied_example": sum(c for _, c in per_round),
            "rounds": sum(a > 0 for a, _ in per_round)}


def round_answers(diagnostics: dict[str, Any]) -> tuple[int, int]:
    """(answers, answers equal to the prompt's example) of one design's diagnostics."""
    answers = diagnostics.get("answers")
    if answers is None:  # rounds recorded before the count: one answer per attempt
        answers = diagnostics.get("attempts", 0) if "parsed" in diagnostics else 0
    return int(answers or 0), int(diagnostics.get("copied_example") or 0)
