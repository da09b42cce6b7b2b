"""``curriculum doctor RUN``: a run directory's health, without changing anything.

Checks, in order: ``config.yaml`` (parses and validates), every committed round in full
against its manifest (``curriculum.manifest``: damaged, pruned or intact files), that the
committed rounds are numbered 0, 1, 2, … without a gap, leftovers (``.partial`` rounds a kill
interrupted, ``.damaged`` rounds a resume moved aside, ``.replaced`` rounds of an interrupted
extension), ``metrics.jsonl`` (unreadable lines, and one ``round_committed`` record per
committed round whose score is the one in that round's ``eval.json``), ``baseline_eval.json``,
whether another process holds the run's lock, the engineer's own files beside the rounds
(``Engineer.resume_problem``: the optuna study), and what ``curriculum run --resume RUN`` would
do (``RunDir.plan_resume``, the very function a resume uses). The run is healthy when nothing
is damaged; pruned checkpoints are not damage.

It opens every file read-only (the lock too: ``flock`` needs no write access), so it works
on a read-only run directory and changes nothing.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path

from curriculum.config import ConfigError
from curriculum.core.safefs import is_plain_file
from curriculum.rundir import RunDir, read_json


@dataclass
class Finding:
    """One line of the report."""

    subject: str
    ok: bool
    detail: str


@dataclass
class DoctorReport:
    """Everything ``diagnose`` found."""

    path: Path
    findings: list[Finding] = field(default_factory=list)
    resume: str = ""
    """What a resume would do."""

    @property
    def healthy(self) -> bool:
        return all(f.ok for f in self.findings)

    def add(self, subject: str, ok: bool, detail: str) -> None:
        self.findings.append(Finding(subject, ok, detail))


def _config(run: RunDir, report: DoctorReport) -> int | None:
    problem = run.check_config()
    if problem is not None:
        report.add("config.yaml", False, problem)
        return None
    config = run.saved_config()
    report.add("config.yaml", True, f"{config.rounds} rounds, engineer {config.engineer.name}, "
                                    f"testbed {config.testbed.name}, trainer {config.trainer.name}")
    return config.rounds


def _leftovers(run: RunDir, report: DoctorReport) -> None:
    meaning = {"partial": "an interrupted round (removed on resume)",
               "replaced": "an interrupted extension (restored on resume)",
               "damaged": "moved aside by a resume (kept for inspection)"}
    for item in sorted(run.rounds_dir.glob(".round_*")):
        kind = next((k for k in meaning if f".{k}" in item.name), None)
        if kind is not None:
            report.add(f"rounds/{item.name}", True, meaning[kind])


def _contiguous(run: RunDir, rounds: list[int], report: DoctorReport) -> None:
    for stray in run.stray_round_entries():
        report.add(f"rounds/{stray.name}", False, "not a round directory (a resume moves it aside)")
    gap = next((position for position, index in enumerate(rounds) if index != position), None)
    if gap is not None:
        later = ", ".join(str(i) for i in rounds if i > gap)
        report.add("rounds", False, f"round {gap} is missing (rounds/round_{gap:03d}): round(s) "
                                    f"{later} cannot be continued from")


def _metrics(run: RunDir, rounds: list[int], report: DoctorReport) -> None:
    records = run.metrics_records()
    if not records and not rounds:
        return
    bad = [r.line for r in records if r.error is not None]
    detail = f"{len(records) - len(bad)} records"
    if bad:
        detail += f"; unreadable line(s) {', '.join(map(str, bad[:5]))}" + (" …" if len(bad) > 5 else "")
        detail += " (dropped on resume; the rounds' own files are not affected)"
    values = [r.value for r in records if r.error is None]
    problems = []
    for index in rounds:
        try:
            expected = run.committed_record(index)
        except (ConfigError, TypeError, ValueError, KeyError):
            continue  # the round's own finding says why its records are unreadable
        problem = run.metrics_problem(values, index, expected)
        if problem is not None:
            problems.append(problem)
    if problems:
        report.add("metrics.jsonl", False, f"{detail}; disagrees with the committed rounds: "
                   + "; ".join(problems[:5]) + (" …" if len(problems) > 5 else "")
                   + " (a resume rewrites these records from the rounds' files)")
    else:
        report.add("metrics.jsonl", True, detail + (f", agreeing with all {len(rounds)} rounds"
                                                    if rounds else ""))


def _lock(run: RunDir, report: DoctorReport) -> None:
    path = run.path / ".lock"
    if not os.path.lexists(path):
        return
    if not is_plain_file(path):
        report.add("lock", False, ".lock is not a plain file (a link, a device...); "
                                  "a resume refuses it: remove it")
        return
    try:  # read-only: flock needs no write access, and the doctor writes nothing; no link followed
        handle = open(path, opener=lambda name, flags: os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK))
    except OSError as exc:
        report.add("lock", True, f"cannot be checked ({exc.strerror or exc})")
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            report.add("lock", True, f"in use by a running process (pid {handle.read(40).strip() or '?'})")
        except OSError as exc:
            report.add("lock", True, f"cannot be checked ({exc.strerror or exc})")


def _engineer_files(run: RunDir, last: int | None, report: DoctorReport) -> None:
    """The engineer's own files beside the rounds (``Engineer.resume_problem``)."""
    from curriculum.loop import engineer_resume_problem

    try:
        problem = engineer_resume_problem(run, last, writing=False)
    except ConfigError as err:  # a round's state the engineer cannot read: its round says why
        problem = str(err)
    if problem is not None:
        report.add("engineer files", False, problem)


def diagnose(path: str | Path) -> DoctorReport:
    """The health report of a run directory (see the module docstring)."""
    run = RunDir.open(path)
    report = DoctorReport(run.path)
    total = _config(run, report)
    rounds = run.completed_rounds()
    checked = {index: run.check_round(index) for index in rounds}
    for index, health in checked.items():
        report.add(f"round {index}", health.ok, f"{health.describe()} ({health.files} files checked)")
    _contiguous(run, rounds, report)
    _leftovers(run, report)
    _metrics(run, rounds, report)
    baseline = run.path / "baseline_eval.json"
    if os.path.lexists(baseline):
        try:
            read_json(baseline)
            report.add("baseline_eval.json", True, "parses")
        except ConfigError as err:
            report.add("baseline_eval.json", False, str(err))
    _lock(run, report)
    plan = run.plan_resume(checked)
    if report.findings[0].ok and not plan.refused:
        _engineer_files(run, plan.last, report)
    if not report.findings[0].ok:
        report.resume = "cannot resume: config.yaml is damaged (see above)"
    elif plan.refused:
        report.resume = plan.explain(run.path)
    elif plan.dropped:
        report.resume = "a resume would fall back: " + plan.explain(run.path)
    elif total is not None and len(rounds) >= total:
        report.resume = (f"finished ({len(rounds)} of {total} rounds); `--resume {run.path} "
                         f"--rounds N` with N > {total} extends it")
    else:
        after = "from round 0" if plan.last is None else f"after round {plan.last}"
        report.resume = f"a resume continues {after}" + (f" ({len(rounds)} of {total} rounds done)"
                                                         if total is not None else "")
    return report
