"""Library side of ``curriculum show RUN_DIR --envs`` and ``--env HASH`` (SPADE's memory).

* ``list_envs(run_dir)`` — every design remembered in ``<run_dir>/spade_memory.sqlite``, in
  design order (``MemoryEntry``: hash, round, skill, verdict and reason, regret, win rates,
  lineage, active flag...).
* ``show_env(run_dir, hash)`` — one entry by full hash or unique prefix, with its program, hint
  and the designer's raw output; ``KeyError`` when absent.
* ``envs_table(entries)`` and ``env_panel(entry)`` — rich renderables of the same, for the CLI.
* ``curriculum spade novelty RUN ...`` — how new the admitted designs are, per round
  (``engineers.spade.novelty``).
* ``export_pool(run_dir, out, history)`` — ``curriculum spade export RUN --out DIR``: every
  admitted environment of the run as a reusable pool (format below); ``history``: the run's
  committed ``RoundReport``s (the command reads them through ``CommandHost.run_history``).

Export format (``EXPORT_FORMAT``, version ``EXPORT_VERSION``), three files in ``DIR``:

* ``spade_pool.jsonl`` — one ``PoolEnvironment`` per line (hash, setting, skill, hint, program,
  class_name), the file ``load_pool`` reads: ``testbed.initial_pool: memory:DIR`` trains a fresh
  run on it (with the ``fixed`` engineer, a fixed pool that a designer made);
* ``environments.jsonl`` — one object per admitted environment, in design order: ``hash``,
  ``setting``, ``skill``, ``hint``, ``program``, ``round`` (designed after that round),
  ``admission`` (``checks_passed``, ``seconds``, ``closest_seed``, ``seed_similarity``),
  ``lineage`` (``parent``: the environment it mutates, ``ancestors``: parent, grandparent, … as
  far as the memory knows, ``corpus_doc_id``: the grounding document), ``active`` (still in the
  memory's FIFO at export), ``regret`` / ``win_rate_with_hint`` / ``win_rate_without`` (latest),
  and ``history``: every play recorded in the run's rounds (``round``, ``regret``,
  ``raw_regret``, ``win_rate``, ``win_rate_hint``, ``mean_return``, ``mean_return_hint``,
  ``learning_potential``);
* ``manifest.json`` — ``format``, ``version``, ``run`` (the source run directory), ``setting``
  and ``environments`` (the count).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from curriculum.core.commands import CommandHost
from curriculum.core.records import RoundReport
from engineers.spade.memory import FILENAME, Memory, MemoryEntry
from engineers.spade.novelty import THRESHOLD, novelty_table
from engineers.spade.novelty import novelty as novelty_report

EXPORT_FORMAT = "curriculum-spade-pool"
EXPORT_VERSION = 1
ENVIRONMENTS_FILE = "environments.jsonl"
MANIFEST_FILE = "manifest.json"


def _open(run_dir: str | Path) -> Memory:
    path = Path(run_dir) / FILENAME
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} has no SPADE environment memory ({FILENAME})")
    return Memory(path)


def list_envs(run_dir: str | Path) -> list[MemoryEntry]:
    """All remembered designs of a run, oldest first."""
    memory = _open(run_dir)
    try:
        return memory.entries()
    finally:
        memory.close()


def show_env(run_dir: str | Path, hash: str) -> MemoryEntry:
    """One remembered design by hash or unique hash prefix."""
    memory = _open(run_dir)
    try:
        entry = memory.get(hash)
    finally:
        memory.close()
    if entry is None:
        raise KeyError(f"no environment {hash!r} in {run_dir}")
    return entry


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def played(entry: MemoryEntry) -> bool:
    """Whether the agent played the environment (its outcome was recorded)."""
    return entry.win_rate_without is not None or entry.win_rate_with_hint is not None


def _seed(entry: MemoryEntry) -> str:
    """Closest seed-library environment and source similarity (admitted designs), e.g. ``take_away 0.97``."""
    name, sim = entry.extra.get("closest_seed"), entry.extra.get("seed_similarity")
    return "-" if name is None or sim is None else f"{name} {sim:.2f}"


def envs_table(entries: list[MemoryEntry]):
    """A rich table: one row per design."""
    from rich.table import Table
    from rich.text import Text

    from curriculum.core.terminal import terminal_safe

    table = Table(title=f"SPADE environments ({sum(e.admitted for e in entries)} admitted, "
                        f"{sum(played(e) for e in entries)} played / {len(entries)})")
    for column in ("hash", "round", "skill", "verdict", "played", "regret", "win w/ hint", "win w/o",
                   "closest seed", "parent", "active", "doc"):
        table.add_column(column)
    for e in entries:
        verdict = "admitted" if e.admitted else f"rejected: {e.reason}"
        if e.near_duplicate_of:
            verdict += f" (near dup of {e.near_duplicate_of[:8]})"
        cells = (e.hash, str(e.round), e.skill, verdict, "yes" if played(e) else "no", _num(e.regret),
                 _num(e.win_rate_with_hint), _num(e.win_rate_without), _seed(e), (e.parent or "-")[:8],
                 "yes" if e.active else "no", e.corpus_doc_id or "-")
        table.add_row(*(Text(terminal_safe(str(cell))) for cell in cells))  # model text: shown, not acted on
    return table


def env_panel(entry: MemoryEntry):
    """A rich group: the entry's fields, its hint and its program with syntax highlighting."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.text import Text

    from curriculum.core.terminal import terminal_safe

    head = "\n".join([
        f"hash {entry.hash}   round {entry.round}   setting {entry.setting}   skill {entry.skill}",
        f"verdict: {'admitted' if entry.admitted else 'rejected: ' + str(entry.reason)}"
        + (f" — {entry.detail}" if entry.detail else ""),
        f"regret {_num(entry.regret)}   win rate with hint {_num(entry.win_rate_with_hint)}   "
        f"without {_num(entry.win_rate_without)}   active {entry.active}",
        f"parent {entry.parent or '-'}   corpus document {entry.corpus_doc_id or '-'}"
        + (f"   near duplicate of {entry.near_duplicate_of}" if entry.near_duplicate_of else ""),
        f"hint: {entry.hint or '-'}",
    ])
    parts = [Panel(Text(terminal_safe(head)), title="environment")]  # model text: shown, never acted on
    if entry.program:
        parts.append(Syntax(terminal_safe(entry.program), "python", line_numbers=True))
    elif entry.extra.get("output"):
        parts.append(Panel(Text(terminal_safe(str(entry.extra["output"]))),
                           title="designer output (no program parsed)"))
    return Group(*parts)


def _history(reports: Sequence[RoundReport]) -> dict[str, list[dict[str, Any]]]:
    """env hash → its recorded plays, in round order (``RoundReport.env_outcomes``)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        for o in report.env_outcomes:
            out.setdefault(o.env_id, []).append({
                "round": report.round, "regret": o.regret, "raw_regret": o.raw_regret,
                "win_rate": o.win_rate, "win_rate_hint": o.win_rate_hint, "mean_return": o.mean_return,
                "mean_return_hint": o.mean_return_hint, "learning_potential": o.learning_potential})
    return out


def export_pool(run_dir: str | Path, out: str | Path, history: Sequence[RoundReport]) -> dict[str, Any]:
    """Write every admitted environment of ``run_dir`` (whose committed rounds are ``history``) to
    ``out`` (module docstring); returns the
    manifest. ``FileNotFoundError`` without a memory, ``ValueError`` when nothing was admitted or
    ``out`` already holds an export."""
    from curriculum.core.pool import PoolEnvironment
    from testbeds.spade.saved_pool import POOL_FILE, save_pool

    run_dir, out = Path(run_dir), Path(out)
    entries = [e for e in list_envs(run_dir) if e.admitted and e.program]
    if not entries:
        raise ValueError(f"{run_dir} has no admitted environment to export")
    if (out / POOL_FILE).exists() or (out / MANIFEST_FILE).exists():
        raise ValueError(f"{out} already holds an exported pool; choose an empty directory")
    out.mkdir(parents=True, exist_ok=True)
    parents = {e.hash: e.parent for e in list_envs(run_dir)}
    plays = _history(history)
    settings = sorted({e.setting for e in entries})
    rows = []
    for e in entries:
        ancestors, seen, node = [], {e.hash}, e.parent
        while node and node not in seen:
            ancestors.append(node)
            seen.add(node)
            node = parents.get(node)
        rows.append({
            "hash": e.hash, "setting": e.setting, "skill": e.skill, "hint": e.hint or "", "program": e.program,
            "round": e.round, "active": e.active,
            "admission": {k: e.extra.get(k) for k in ("checks_passed", "admission_seconds", "closest_seed",
                                                      "seed_similarity")},
            "lineage": {"parent": e.parent, "ancestors": ancestors, "corpus_doc_id": e.corpus_doc_id},
            "regret": e.regret, "win_rate_with_hint": e.win_rate_with_hint, "win_rate_without": e.win_rate_without,
            "history": plays.get(e.hash, []),
        })
    save_pool(out, [PoolEnvironment(hash=r["hash"], setting=r["setting"], skill=r["skill"], hint=r["hint"],
                                    program=r["program"]) for r in rows])
    (out / ENVIRONMENTS_FILE).write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    manifest = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "run": str(run_dir),
                "setting": settings[0] if len(settings) == 1 else settings, "environments": len(rows)}
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def commands(host: CommandHost):
    """``curriculum spade`` (this engineer's registry entry declares it; ``curriculum.core.commands``)."""
    import typer

    app = typer.Typer(help="SPADE runs: export the environments a designer made, measure how new they are.",
                      no_args_is_help=True)

    @app.command(epilog="Example: curriculum spade export runs/spade-run --out pools/spade-run")
    def export(run: Path = typer.Argument(..., help="SPADE run directory"),
               out: Path = typer.Option(..., "--out", help="Directory to write the pool to")) -> None:
        """Every admitted environment with hint, skill, admission results, lineage and regret
        history; train on it with testbed.initial_pool=memory:OUT."""
        try:
            manifest = export_pool(run, out, host.run_history(run))
        except (FileNotFoundError, ValueError) as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"exported {manifest['environments']} environments to {out} "
                   f"(train on them: testbed.initial_pool=memory:{out})")

    @app.command(epilog="Example: curriculum spade novelty runs/spade_cpu/runs/spade-seed* --out novelty.json")
    def novelty(runs: list[Path] = typer.Argument(..., help="SPADE run directories (e.g. a comparison's seeds)"),
                threshold: float = typer.Option(THRESHOLD, min=0.0, max=1.0,
                                                help="Closest seed-library similarity below which a design "
                                                     "counts as a new game"),
                out: Path | None = typer.Option(None, "--out", help="Also write the report as JSON")) -> None:
        """Per design round: the share of admitted designs that are new games (not edits of a
        seed-library game) and the Vendi score / n of what was admitted."""
        from rich.console import Console

        try:
            report = novelty_report(runs, threshold)
        except (FileNotFoundError, ValueError) as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2) from None
        Console().print(novelty_table(report))
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report, indent=1) + "\n")
            typer.echo(f"wrote {out}")

    return app

