"""Library side of ``curriculum show RUN_DIR --envs`` and ``--env HASH`` (SPADE's memory).

* ``list_envs(run_dir)`` — every design remembered in ``<run_dir>/spade_memory.sqlite``, in
  design order (``MemoryEntry``: hash, round, skill, verdict and reason, regret, win rates,
  lineage, active flag...).
* ``show_env(run_dir, hash)`` — one entry by full hash or unique prefix, with its program, hint
  and the designer's raw output; ``KeyError`` when absent.
* ``envs_table(entries)`` and ``env_panel(entry)`` — rich renderables of the same, for the CLI.
"""

from __future__ import annotations

from pathlib import Path

from engineers.spade.memory import FILENAME, Memory, MemoryEntry


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

    table = Table(title=f"SPADE environments ({sum(e.admitted for e in entries)} admitted, "
                        f"{sum(played(e) for e in entries)} played / {len(entries)})")
    for column in ("hash", "round", "skill", "verdict", "played", "regret", "win w/ hint", "win w/o",
                   "closest seed", "parent", "active", "doc"):
        table.add_column(column)
    for e in entries:
        verdict = "admitted" if e.admitted else f"rejected: {e.reason}"
        if e.near_duplicate_of:
            verdict += f" (near dup of {e.near_duplicate_of[:8]})"
        table.add_row(e.hash, str(e.round), e.skill, verdict, "yes" if played(e) else "no", _num(e.regret),
                      _num(e.win_rate_with_hint), _num(e.win_rate_without), _seed(e), (e.parent or "-")[:8],
                      "yes" if e.active else "no", e.corpus_doc_id or "-")
    return table


def env_panel(entry: MemoryEntry):
    """A rich group: the entry's fields, its hint and its program with syntax highlighting."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.syntax import Syntax

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
    parts = [Panel(head, title="environment")]
    if entry.program:
        parts.append(Syntax(entry.program, "python", line_numbers=True))
    elif entry.extra.get("output"):
        parts.append(Panel(entry.extra["output"], title="designer output (no program parsed)"))
    return Group(*parts)
