"""``curriculum show``: what happened in a run, round by round.

Whatever a model wrote (prompt, answer, parsed proposal, changes, diagnostics) is printed through
``terminal_safe``: an escape sequence in it is shown, never acted on by the terminal.

Every score names its held-out suite: ``test score`` (what reports and ``compare`` use) beside
``validation score`` (what the engineer read). A run dir written before runs had two suites has
one eval suite, shown as ``validation score`` with the note that it was also the reported one.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from curriculum.answers import round_answers
from curriculum.console import eval_table, proposal_table
from curriculum.core.records import LEGACY_SUITE, suite_label
from curriculum.core.terminal import terminal_safe
from curriculum.report import run_layout
from curriculum.rundir import RunDir


def show_run(run_dir: Path, *, round_index: int | None, console: Console) -> None:
    run = RunDir.open(run_dir)
    rounds = run.completed_rounds()
    if round_index is None:
        _show_rounds(run, run_dir, rounds, console)
        return
    if round_index not in rounds:
        raise FileNotFoundError(f"round {round_index} is not completed in {run_dir} (completed: {rounds})")
    _show_round(run, round_index, console)


def _show_rounds(run: RunDir, run_dir: Path, rounds: list[int], console: Console) -> None:
    """One row per completed round: scores, the engineer, whether its answer parsed, its changes."""
    table = Table(title=str(run_dir))
    for column in ("round", "test score", "validation score", "train reward", "engineer", "answer parsed",
                   "changes by project"):
        table.add_column(column)
    legacy = False
    answers: list[tuple[bool, bool]] = []  # (parsed, constrained) of each model answer
    said, copies = 0, 0  # the model's answers (one per attempt); those equal to the prompt's example
    for index in rounds:
        report = run.load_round(index)
        design = report.design
        legacy = legacy or report.eval.suite is None
        parsed = design.diagnostics.get("parsed") if design else None
        if parsed is not None:
            answers.append((bool(parsed), bool(design.diagnostics.get("constrained"))))
            answered, copied = round_answers(design.diagnostics)
            said, copies = said + answered, copies + copied
        table.add_row(str(index), "-" if report.test is None else f"{report.test.score:.4f}",
                      f"{report.eval.score:.4f}",
                      f"{report.train_metrics.get('train/mean_reward', float('nan')):.4f}",
                      Text(terminal_safe(design.engineer)) if design else "-", "-" if parsed is None else ("yes" if parsed else "no"),
                      str(len(design.changes)) if design else "-")
    console.print(table)
    if legacy:
        console.print(f"note: this run has one eval suite ({LEGACY_SUITE}); it was written before "
                      "runs had a separate test suite, so its validation score is also its reported score")
    if answers:
        modes = sorted({"constrained" if c else "free text" for _, c in answers})
        console.print(f"engineer answers parsed: {sum(p for p, _ in answers)}/{len(answers)} ({', '.join(modes)}); "
                      f"answers equal to the prompt's example: {copies}/{said}")


def _show_round(run: RunDir, round_index: int, console: Console) -> None:
    """One round: the proposal trained on, its evals, and the engineer's prompt, output and changes."""
    report = run.load_round(round_index)
    layout = run_layout(run.path)
    console.rule(f"round {round_index}: proposal trained on")
    console.print(proposal_table(report.proposal))
    if report.test is not None:
        console.print(eval_table(report.test, title=f"round {round_index} test suite (reported; not shown to the engineer)",
                                 layout=layout))
    console.print(eval_table(report.eval, title=f"round {round_index} {suite_label(report.eval)} suite (what the engineer read)",
                             layout=layout))
    design = report.design
    if design is None:
        console.print("no design (last round)")
        return
    console.rule(escape(terminal_safe(f"engineer {design.engineer}: prompt")))
    console.print(terminal_safe(design.design.prompt or "(no model prompt)"), markup=False, highlight=False)
    console.rule("raw output")
    console.print(terminal_safe(design.design.output or "(no model output)"), markup=False, highlight=False)
    parsed = design.diagnostics.get("parsed")
    if parsed is None:
        console.rule("parsed proposal")
    else:
        console.rule(f"parsed proposal: engineer proposed (parsed: {'yes' if parsed else 'no'}, "
                     f"{design.diagnostics.get('decoding', 'decoding not recorded')})")
    console.print(terminal_safe(json.dumps(design.design.raw, indent=1, default=str)[:4000]), markup=False,
                  highlight=False)
    console.rule("projected proposal")
    console.print(proposal_table(design.projected))
    console.rule(f"project's changes ({len(design.changes)})")
    for change in design.changes:
        console.print(terminal_safe(f"{change.path}: {change.proposed!r} → {change.applied!r} ({change.reason})"),
                      markup=False, highlight=False)
    if design.diagnostics:
        console.rule("diagnostics")
        console.print(terminal_safe(json.dumps(design.diagnostics, indent=1, default=str)), markup=False,
                      highlight=False)


def engineer_view(run_dir: Path, item: str | None = None):
    """``curriculum show --envs`` / ``--env ITEM``: what the run's engineer kept in its run dir
    (``Engineer.run_view``; e.g. the environments it designed)."""
    from curriculum.config import ConfigError, section_name
    from curriculum.registry import DEFAULT_ENGINEER, ENGINEERS, UnknownName

    name = section_name(RunDir.open(run_dir)._saved_config_data().get("engineer")) or DEFAULT_ENGINEER
    try:
        engineer = ENGINEERS.get(name).load()
    except UnknownName as err:
        raise ConfigError(f"{run_dir}: {err}") from None
    view = engineer.run_view(Path(run_dir), item)
    if view is None:
        raise FileNotFoundError(f"{run_dir}: its engineer {name!r} keeps no environments to show")
    return view
