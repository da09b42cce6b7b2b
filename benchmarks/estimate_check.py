"""Does ``--dry-run``'s wall-time estimate hold? The estimate of each run dir's saved config on this
machine beside the seconds the run took, in total and per phase, and their ratio.

    python benchmarks/estimate_check.py RUN_DIR [RUN_DIR ...] [--threads N] [--json OUT]

The estimate is ``curriculum.plan.wall_time`` of the run's ``config.yaml`` for the rounds the run
dir has completed, on this machine's measured rates (``--threads``: the torch threads the run had,
e.g. 1 for a ``compare --jobs 2`` worker on 2 cores; default: the config's
``trainer.torch_threads``, else this process's), counting only what
the run did: the warm start where it trained one (not where it loaded it from the cache), no eval
the run reused from the eval cache.

The measured seconds come from the run's ``metrics.jsonl`` where the run recorded its phases
(``curriculum.loop.PhaseTimer``: ``setup``, each eval before round 0, the warm start, and per round
``train``, ``eval``, ``test_eval``, ``design`` and the rest, ``sample`` and ``commit``, as
``overhead``), else from its files' modification times: the start (``.lock``, written when the
run dir is created; a resume writes it again), each eval before round 0 (its JSON file), the warm
start (``warmstart.json``), each round's commit (its ``eval.json``, written with the round's
other files before the checkpoint), and TRL's ``train/seconds`` of each round; the rest of a round
(its evals, design, commit) is then one number, ``rest``, set beside the estimate's ``eval +
test_eval + design + overhead (+ final_test)``. A resumed run has no total (the pause between its
processes is not the run's).

Ratios are estimate / measured: above 1 the estimate is long. A run that shared its cores with
other jobs took longer than the estimate of a quiet machine; the output cannot tell, so say which
runs were quiet when quoting it (docs/scaling.md, "Wall-time estimate").
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curriculum.config import load_config
from curriculum.core.sizing import DEFAULT_GPU, GPUS
from curriculum.plan import read_strategy, wall_time
from curriculum.presets import Machine
from curriculum.walltime import PHASES, Estimate

PRE_EVALS = ("baseline_eval", "baseline_test_eval", "warmstart_eval", "warmstart_test_eval")
"""The evals before round 0, as the run's files and metrics lines name them."""
REST = ("eval", "test_eval", "design", "overhead", "final_test")
"""The estimate's phases a round's ``rest`` stands for, where the run recorded no phases."""


@dataclass
class Measured:
    """What a run dir says it took (module docstring)."""

    path: Path
    rounds: int
    source: str
    """``recorded`` (its metrics lines carry seconds) or ``file times``."""
    phases: dict[str, float] = field(default_factory=dict)
    total: float | None = None
    per_round: list[tuple[float, float | None]] = field(default_factory=list)
    """Each round's (training seconds, whole round's seconds; ``None`` where not known)."""
    cached: set[str] = field(default_factory=set)
    """Evals before round 0 reused from the eval cache, and ``warmstart`` when loaded from its cache."""
    notes: list[str] = field(default_factory=list)


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The readable JSON objects of ``metrics.jsonl`` (a line cut short by a kill is skipped)."""
    records = []
    metrics = path / "metrics.jsonl"
    for line in metrics.read_text().splitlines() if metrics.is_file() else []:
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def completed_rounds(path: Path) -> list[int]:
    """Rounds whose directory holds a committed round (its ``eval.json``)."""
    rounds = path / "rounds"
    found = [int(d.name.split("_")[1]) for d in rounds.glob("round_*") if (d / "eval.json").is_file()] \
        if rounds.is_dir() else []
    return sorted(found)


def measure(path: Path) -> Measured:
    """The seconds ``path``'s run took, per phase and in total (module docstring)."""
    records = read_metrics(path)
    rounds = completed_rounds(path)
    committed = {r["round"]: r for r in records if r.get("event") == "round_committed"}
    pre = {r["event"]: r for r in records if r.get("round") == -1 and r.get("event")}  # the last of each
    recorded = bool(rounds) and all(isinstance(committed.get(i, {}).get("seconds"), dict) for i in rounds)
    measured = Measured(path, len(rounds), "recorded" if recorded else "file times")
    measured.cached = {e for e in PRE_EVALS if pre.get(e, {}).get("cached") is True}
    if pre.get("warmstart", {}).get("warmstart/cached") == 1.0:
        measured.cached.add("warmstart")
    if recorded:
        _from_records(measured, records, pre, [committed[i] for i in rounds])
    else:
        _from_file_times(measured, pre, [committed.get(i, {}) for i in rounds])
    return measured


def _from_records(measured: Measured, records: list[dict[str, Any]], pre: dict[str, dict[str, Any]],
                  rounds: list[dict[str, Any]]) -> None:
    phases = measured.phases
    setups = [r["seconds"] for r in records if r.get("event") == "setup" and isinstance(r.get("seconds"), int | float)]
    phases["setup"] = float(sum(setups))
    for event in (*PRE_EVALS, "warmstart"):
        if isinstance(pre.get(event, {}).get("seconds"), int | float):
            phases[event] = float(pre[event]["seconds"])
    for record in rounds:
        seconds = {k: float(v) for k, v in record["seconds"].items() if isinstance(v, int | float)}
        measured.per_round.append((seconds.get("train", 0.0), seconds.get("round")))
        parts = 0.0
        for phase in ("train", "eval", "test_eval", "design"):
            phases[phase] = phases.get(phase, 0.0) + seconds.get(phase, 0.0)
            parts += seconds.get(phase, 0.0)
        # sampling, committing, and whatever else the round spent outside its phases
        phases["overhead"] = phases.get("overhead", 0.0) + max(seconds.get("round", parts) - parts, 0.0)
    measured.total = sum(phases.values())
    if len(setups) > 1:
        measured.notes.append(f"resumed {len(setups) - 1} time(s): the total adds the processes' recorded seconds")


def _mtime(path: Path) -> float | None:
    return path.stat().st_mtime if path.is_file() else None


def _from_file_times(measured: Measured, pre: dict[str, dict[str, Any]], rounds: list[dict[str, Any]]) -> None:
    """Phases from the files' modification times (module docstring)."""
    path, phases = measured.path, measured.phases
    start = _mtime(path / ".lock")
    marks = [(e, _mtime(path / f"{e}.json")) for e in ("baseline_eval", "baseline_test_eval", "warmstart",
                                                         "warmstart_eval", "warmstart_test_eval")]
    marks = [(e, t) for e, t in marks if t is not None]
    commits = [_mtime(path / "rounds" / f"round_{i:03d}" / "eval.json") for i in range(measured.rounds)]
    fresh = start is not None and all(start <= t for _, t in marks) and all(start <= t for t in commits if t)
    previous = start if fresh else None
    for position, (event, at) in enumerate(marks):
        if previous is not None:
            phases[f"setup+{event}" if position == 0 else event] = at - previous
        previous = at
    train = rest = 0.0
    for index, (record, at) in enumerate(zip(rounds, commits, strict=True)):
        began = previous
        if start is not None and began is not None and at is not None and began < start <= at:
            began = None  # a resume started this round's process: its start is not known
            measured.notes.append(f"resumed in round {index}: rounds before it and after it counted apart")
        seconds = float(record.get("train/seconds", 0.0))
        train += seconds
        if began is not None and at is not None:
            rest += at - began - seconds
        else:
            rest = float("nan")
        measured.per_round.append((seconds, at - began if began is not None and at is not None else None))
        previous = at
    phases["train"] = train
    phases["rest"] = rest
    if fresh and previous is not None:
        measured.total = previous - start
    else:
        measured.notes.append("not one uninterrupted process, or its start is unknown: no total")


def estimate_for(path: Path, rounds: int, threads: int | None) -> tuple[Estimate, Any]:
    """The estimate of ``path``'s saved config on this machine for ``rounds`` rounds."""
    config = load_config(path / "config.yaml", [f"rounds={max(rounds, 1)}"])
    machine = Machine("cpu", "estimate_check", os.cpu_count() or 1)
    return wall_time(config, read_strategy(None), GPUS[DEFAULT_GPU], machine, threads=threads), config


ORDER = ("setup", "baseline_eval", "baseline_test_eval", "warmstart", "warmstart_eval", "warmstart_test_eval",
         "train", "eval", "test_eval", "design", "overhead", "final_test", "rest")
"""The rows of a table, in the order a run goes through them (``setup+X``: set-up and X as one span)."""


def compare(measured: Measured, estimate: Estimate) -> list[tuple[str, float, float | None]]:
    """Rows ``(phase, estimated, measured)`` for what the run did (cached evals and a cached warm
    start estimated at 0), in ``ORDER``, then ``total`` (``measured`` ``None`` where not known)."""
    est = {p: estimate.phases.get(p, 0.0) for p in PHASES}
    for phase in measured.cached & set(PRE_EVALS):
        est[phase] = 0.0
    est["warmstart"] = 0.0 if "warmstart" in measured.cached or not estimate.budget.warmstart.trained \
        else estimate.warmstart_seconds
    got = measured.phases
    if "rest" in got:  # file times: a round's evals, design and commit are one span
        est["rest"] = sum(est.pop(p) for p in REST)
    else:  # recorded: the test after the last round is that round's test_eval
        est["test_eval"] += est.pop("final_test")
    joined = next((p for p in got if p.startswith("setup+")), None)
    if joined is not None:  # file times: set-up and the first file's phase are one span
        est[joined] = est.pop("setup") + est.pop(joined.removeprefix("setup+"), 0.0)
    elif "setup" not in got and "rest" in got:  # no file before round 0: set-up is in the first round
        est["rest"] += est.pop("setup")
    order = ([joined] if joined else []) + [p for p in ORDER if p != (joined or "").removeprefix("setup+")]
    rows = [(p, est[p], got.get(p)) for p in order if p in est and (est[p] > 0 or p in got)]
    rows.append(("total", sum(est.values()), measured.total))
    return rows


def round_rows(measured: Measured, estimate: Estimate) -> list[tuple[float, float, float, float | None]]:
    """Per round: estimated and measured training seconds, estimated and measured round seconds
    (file times: from the previous commit, so a round holds the previous round's checkpoint save)."""
    rounds = max(measured.rounds, 1)
    train = estimate.phases["train"] / rounds
    span = sum(estimate.phases[p] for p in ("train", "eval", "test_eval", "design", "overhead")) / rounds
    rows = []
    for index, (got_train, got_span) in enumerate(measured.per_round):
        last = estimate.phases["final_test"] if index == measured.rounds - 1 else 0.0
        rows.append((train, got_train, span + last, got_span))
    return rows


def _format(seconds: float | None) -> str:
    if seconds is None or seconds != seconds:
        return "—"
    return f"{seconds:,.0f} s" if seconds < 600 else f"{seconds / 60:,.1f} min"


def _ratio(estimated: float, measured: float | None) -> str:
    if measured is None or measured != measured or measured <= 0 or estimated <= 0:
        return "—"  # not known, or not estimated (a cache's load)
    return f"{estimated / measured:.2f}"


def report(path: Path, threads: int | None) -> dict[str, Any]:
    """Print one run dir's table; return it as data."""
    measured = measure(path)
    estimate, config = estimate_for(path, measured.rounds, threads)
    rows = compare(measured, estimate)
    print(f"\n{path}  ({measured.rounds} rounds; measured from {measured.source}; "
          f"trainer {config.trainer.name}, engineer {config.engineer.name})")
    print(f"  {estimate.note}")
    for note in measured.notes:
        print(f"  note: {note}")
    if measured.cached:
        print(f"  reused from a cache (estimated at 0): {', '.join(sorted(measured.cached))}")
    print(f"  {'phase':<30} {'estimate':>10} {'measured':>10} {'ratio':>6}")
    for phase, estimated, got in rows:
        print(f"  {phase:<30} {_format(estimated):>10} {_format(got):>10} {_ratio(estimated, got):>6}")
    per_round = round_rows(measured, estimate)
    for index, (train, got_train, span, got_span) in enumerate(per_round):
        print(f"  round {index}: train {_format(train)} / {_format(got_train)} ({_ratio(train, got_train)}), "
              f"round {_format(span)} / {_format(got_span)} ({_ratio(span, got_span)})")
    return {"run_dir": str(path), "rounds": measured.rounds, "source": measured.source,
            "cached": sorted(measured.cached), "notes": measured.notes, "note": estimate.note,
            "rows": [{"phase": p, "estimate_s": e, "measured_s": m} for p, e, m in rows],
            "rounds_detail": [{"train_estimate_s": a, "train_measured_s": b, "round_estimate_s": c,
                               "round_measured_s": d} for a, b, c, d in per_round]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads the runs had (default: trainer.torch_threads, else this process's)")
    parser.add_argument("--json", type=Path, default=None, help="also write the tables here")
    args = parser.parse_args(argv)
    tables = [report(path, args.threads) for path in args.run_dirs]
    print(f"\n{'run dir':<60} {'estimate':>10} {'measured':>10} {'ratio':>6}")
    for table in tables:
        _, estimated, got = (lambda r: (r["phase"], r["estimate_s"], r["measured_s"]))(table["rows"][-1])
        print(f"{table['run_dir'][-60:]:<60} {_format(estimated):>10} {_format(got):>10} {_ratio(estimated, got):>6}")
    if args.json is not None:
        args.json.write_text(json.dumps(tables, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
