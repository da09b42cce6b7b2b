"""How often an engineer's model answered, and how often it answered with the prompt's example.

Engineers that ask a model record per round, in their design's ``diagnostics``, ``answers`` (the
model's answers that round, one per attempt) and ``copied_example`` (how many of them were the
example the prompt showed, i.e. nothing designed; the checkpoint engineer). ``answer_counts``
sums both over a run directory's completed rounds, for reports and ``compare`` to print beside
the scores. Rounds written before ``answers`` was recorded count their ``attempts`` (and a
``copied_example`` flag as one copy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curriculum.rundir import RunDir


def answer_counts(run_dir: str | Path) -> dict[str, int]:
    """``{"answers": n, "copied_example": m, "rounds": k}`` over the run's completed rounds:
    ``k`` rounds whose engineer asked a model, ``n`` answers it gave, ``m`` of them the prompt's
    example. All zero for an engineer that asks no model."""
    run = RunDir.open(run_dir)
    counts = {"answers": 0, "copied_example": 0, "rounds": 0}
    for index in run.completed_rounds():
        design = run.load_round(index).design
        answers, copied = round_answers(design.diagnostics if design else {})
        counts["answers"] += answers
        counts["copied_example"] += copied
        counts["rounds"] += int(answers > 0)
    return counts


def round_answers(diagnostics: dict[str, Any]) -> tuple[int, int]:
    """(answers, answers equal to the prompt's example) of one design's diagnostics."""
    answers = diagnostics.get("answers")
    if answers is None:  # rounds recorded before the count: one answer per attempt
        answers = diagnostics.get("attempts", 0) if "parsed" in diagnostics else 0
    return int(answers or 0), int(diagnostics.get("copied_example") or 0)
