"""How new SPADE's designs are: per round, over one run or the seeds of a comparison.

``curriculum spade novelty RUN_DIR [RUN_DIR ...]`` reads each run's ``spade_rounds.jsonl`` (one
``RoundSummary`` per design round, written by the engineer) and reports, per design round:

* ``admitted`` — designs admitted that round;
* ``novel_share`` — the share of admitted designs whose closest seed-library environment
  (``diversity.closest_seed``: source similarity, 1.0 = the same program) is below ``threshold``
  (0.8 by default): designs that are not edits of a seed game;
* ``seed_similarity`` — the mean closest-seed similarity of the admitted designs;
* ``vendi_per_n`` — Vendi score / n of the round's admitted designs (1 / n: all alike, 1: no two
  alike), and ``vendi_per_n_run`` the same over every design the run has admitted so far.

Rounds are pooled over runs by admitted design (``novel_share``, ``seed_similarity``) or by run
(the Vendi columns: each run's value counts once). A run with no ``spade_rounds.jsonl`` (not a
SPADE run, or one stopped before its first design round) is an error naming it: a missing run
must not read as "no novel designs".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import fmean

from engineers.spade.designer import ROUNDS_LOG

THRESHOLD = 0.8
"""Closest-seed similarity below which an admitted design counts as a new game."""


@dataclass(frozen=True)
class RoundNovelty:
    """One design round of one run."""

    run: str
    round: int
    designs: int
    admitted: int
    novel: int
    seed_similarity: list[float]
    vendi_per_n: float | None
    vendi_per_n_run: float | None


def read_rounds(run_dir: str | Path, threshold: float = THRESHOLD) -> list[RoundNovelty]:
    """Every design round of ``run_dir``, in order; ``FileNotFoundError`` without a rounds log."""
    path = Path(run_dir) / ROUNDS_LOG
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: no {ROUNDS_LOG} (not a SPADE run, or no design round finished)")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{number}: not JSON ({err.msg})") from None
        admitted = record.get("admitted") or []
        similarity = record.get("seed_similarity") or {}
        # closest_seed is computed for admitted designs only: [seed name, similarity]
        sims = [float(similarity[h][1]) for h in admitted if h in similarity]
        rows.append(RoundNovelty(
            run=str(run_dir), round=int(record["round"]), designs=int(record.get("designs", 0)),
            admitted=len(admitted), novel=sum(s < threshold for s in sims), seed_similarity=sims,
            vendi_per_n=record.get("vendi_per_n"), vendi_per_n_run=record.get("vendi_per_n_run")))
    return rows


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if present else None


def _last(rows: Sequence[RoundNovelty], run: str) -> RoundNovelty:
    """The run's last design round among ``rows``: its run-so-far Vendi covers the earlier ones."""
    return max((r for r in rows if r.run == run), key=lambda r: r.round)


def summarize(rows: Sequence[RoundNovelty], threshold: float = THRESHOLD) -> list[dict]:
    """Per design round (and ``"all"``), pooled over runs."""
    rounds = sorted({r.round for r in rows})
    out = []
    for key, group in [(rnd, [r for r in rows if r.round == rnd]) for rnd in rounds] + [("all", list(rows))]:
        sims = [s for r in group for s in r.seed_similarity]
        out.append({
            "round": key, "runs": len({r.run for r in group}), "designs": sum(r.designs for r in group),
            "admitted": sum(r.admitted for r in group), "novel": sum(r.novel for r in group),
            "novel_share": sum(s < threshold for s in sims) / len(sims) if sims else None,
            "seed_similarity": fmean(sims) if sims else None,
            "vendi_per_n": _mean([r.vendi_per_n for r in group]),
            # the run-so-far diversity of a run is its last design round's
            "vendi_per_n_run": _mean([_last(group, run).vendi_per_n_run for run in {r.run for r in group}]),
        })
    return out


def novelty(run_dirs: Sequence[str | Path], threshold: float = THRESHOLD) -> dict:
    """The report ``curriculum spade novelty`` prints and writes: per-run rows and the pooled table."""
    rows = [row for run in run_dirs for row in read_rounds(run, threshold)]
    return {"threshold": threshold, "runs": [str(r) for r in run_dirs],
            "rounds": [asdict(r) for r in rows], "summary": summarize(rows, threshold)}


def novelty_table(report: dict):
    """A rich table of ``report["summary"]``."""
    from rich.table import Table

    def fmt(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f}"

    table = Table(title=f"SPADE designs: new games (closest seed-library similarity < {report['threshold']:g}) "
                        f"and diversity, {len(report['runs'])} run(s)")
    for column in ("round", "runs", "designs", "admitted", "new share", "seed sim", "Vendi/n", "run Vendi/n"):
        table.add_column(column, justify="right")
    for e in report["summary"]:
        table.add_row(str(e["round"]), str(e["runs"]), str(e["designs"]), str(e["admitted"]),
                      fmt(e["novel_share"]), fmt(e["seed_similarity"]), fmt(e["vendi_per_n"]),
                      fmt(e["vendi_per_n_run"]))
    return table
