"""Environment memory: every design, its verdict and (once played) its outcome, in SQLite.

One table ``environments`` in ``<run_dir>/spade_memory.sqlite``; one row per program hash:
round, setting, skill, hint, program, admission verdict and reason (with detail), the corpus
document it was grounded on, its lineage (``parent``: the hash of the remembered environment it
mutates), and the outcome that part 2 fills in with ``update_outcome``: regret, win rate with and
without the hint. ``active`` marks the admitted environments kept as the memory proper: when more
than ``capacity`` are active, the oldest admitted ones are deactivated (FIFO, as in the public
SPADE code). Rejected designs are kept (inactive) for ``curriculum show``.

Reads for the design prompt:

* ``seeds(k, min_regret)`` — active entries with regret ≥ ``min_regret``, highest regret first;
* ``too_easy(k, win_rate)`` — active entries whose win rate without hint is ≥ ``win_rate``;
* ``too_hard(k, win_rate)`` — active entries whose win rate with hint is ≤ ``win_rate``.

Each write commits at once, so a run directory copied at any moment holds a consistent memory.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

FILENAME = "spade_memory.sqlite"
"""File name of the memory in a run directory."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS environments (
    hash TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    round INTEGER NOT NULL,
    setting TEXT NOT NULL,
    skill TEXT NOT NULL,
    hint TEXT,
    program TEXT,
    admitted INTEGER NOT NULL,
    reason TEXT,
    detail TEXT,
    parent TEXT,
    corpus_doc_id TEXT,
    regret REAL,
    win_rate_with_hint REAL,
    win_rate_without REAL,
    active INTEGER NOT NULL DEFAULT 0,
    near_duplicate_of TEXT,
    extra TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS environments_active ON environments(active, seq);
"""


class MemoryEntry(BaseModel):
    """One remembered design."""

    model_config = ConfigDict(extra="forbid")

    hash: str
    """Program hash (``curriculum.core.pool.program_hash``)."""
    seq: int
    """Insertion order."""
    round: int
    """Round in which it was designed."""
    setting: str
    """``games`` or ``tools``."""
    skill: str
    """Skill tag the design call asked for."""
    hint: str | None
    """Privileged hint."""
    program: str | None
    """Program text (None when nothing could be parsed)."""
    admitted: bool
    """Admission verdict."""
    reason: str | None
    """Rejection reason (``RejectReason`` value) when not admitted."""
    detail: str | None
    """What exactly failed."""
    parent: str | None
    """Hash of the remembered environment this design mutates."""
    corpus_doc_id: str | None
    """Grounding document."""
    regret: float | None
    """Hint-based regret, once played (part 2)."""
    win_rate_with_hint: float | None
    """Agent win rate with the hint, once played."""
    win_rate_without: float | None
    """Agent win rate without the hint, once played."""
    active: bool
    """Part of the active memory (admitted and within capacity)."""
    near_duplicate_of: str | None
    """Hash of an environment it nearly duplicates, if flagged."""
    extra: dict[str, Any]
    """Anything else worth keeping (first observation, admission seconds...)."""
    created: float
    """Unix time of insertion."""


class Memory:
    """SQLite-backed environment memory (see module docstring)."""

    def __init__(self, path: str | Path, capacity: int = 200) -> None:
        self.path = Path(path)
        self.capacity = capacity
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.executescript(_SCHEMA)
        self._db.commit()

    @classmethod
    def in_run_dir(cls, run_dir: str | Path, capacity: int = 200) -> Memory:
        return cls(Path(run_dir) / FILENAME, capacity)

    def close(self) -> None:
        self._db.close()

    # -- writes ---------------------------------------------------------------------------------
    def record(self, *, hash: str, round: int, setting: str, skill: str, hint: str | None,
               program: str | None, admitted: bool, reason: str | None = None,
               detail: str | None = None, parent: str | None = None,
               corpus_doc_id: str | None = None, near_duplicate_of: str | None = None,
               extra: dict[str, Any] | None = None) -> MemoryEntry:
        """Insert a design (a repeat of a known hash updates nothing and returns the old row)."""
        existing = self.get(hash)
        if existing is not None:
            return existing
        seq = self._db.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM environments").fetchone()[0]
        self._db.execute(
            "INSERT INTO environments (hash, seq, round, setting, skill, hint, program, admitted, "
            "reason, detail, parent, corpus_doc_id, active, near_duplicate_of, extra, created) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (hash, seq, round, setting, skill, hint, program, int(admitted), reason, detail, parent,
             corpus_doc_id, int(admitted), near_duplicate_of, json.dumps(extra or {}), time.time()))
        self._evict()
        self._db.commit()
        entry = self.get(hash)
        assert entry is not None
        return entry

    def update_outcome(self, hash: str, regret: float | None, win_rate_with_hint: float | None,
                       win_rate_without: float | None) -> None:
        """Store what the agent's plays measured for an environment."""
        cur = self._db.execute(
            "UPDATE environments SET regret=?, win_rate_with_hint=?, win_rate_without=? WHERE hash=?",
            (regret, win_rate_with_hint, win_rate_without, hash))
        if cur.rowcount == 0:
            raise KeyError(f"no environment {hash!r} in memory")
        self._db.commit()

    def _evict(self) -> None:
        active = self._db.execute("SELECT COUNT(*) FROM environments WHERE active=1").fetchone()[0]
        over = active - self.capacity
        if over > 0:
            self._db.execute("UPDATE environments SET active=0 WHERE hash IN (SELECT hash FROM "
                             "environments WHERE active=1 ORDER BY seq LIMIT ?)", (over,))

    # -- reads ----------------------------------------------------------------------------------
    def get(self, hash: str) -> MemoryEntry | None:
        """One entry by full hash or unique prefix."""
        rows = self._db.execute("SELECT * FROM environments WHERE hash LIKE ? ORDER BY seq",
                                (hash.replace("%", "").replace("_", "") + "%",)).fetchall()
        if len(rows) > 1:
            exact = [r for r in rows if r["hash"] == hash]
            if not exact:
                raise KeyError(f"hash prefix {hash!r} is ambiguous ({len(rows)} matches)")
            rows = exact
        return _entry(rows[0]) if rows else None

    def entries(self, *, active_only: bool = False, round: int | None = None) -> list[MemoryEntry]:
        """All entries in insertion order (optionally only active ones, or one round's)."""
        query, args = "SELECT * FROM environments WHERE 1=1", []
        if active_only:
            query += " AND active=1"
        if round is not None:
            query += " AND round=?"
            args.append(round)
        return [_entry(r) for r in self._db.execute(query + " ORDER BY seq", args).fetchall()]

    def seeds(self, k: int, min_regret: float) -> list[MemoryEntry]:
        """Active entries with regret ≥ ``min_regret``, highest regret first (newest on ties)."""
        rows = self._db.execute("SELECT * FROM environments WHERE active=1 AND regret >= ? "
                                "ORDER BY regret DESC, seq DESC LIMIT ?", (min_regret, k)).fetchall()
        return [_entry(r) for r in rows]

    def too_easy(self, k: int, win_rate: float) -> list[MemoryEntry]:
        """Active entries solved without the hint at a rate ≥ ``win_rate``, newest first."""
        rows = self._db.execute("SELECT * FROM environments WHERE active=1 AND win_rate_without >= ? "
                                "ORDER BY seq DESC LIMIT ?", (win_rate, k)).fetchall()
        return [_entry(r) for r in rows]

    def too_hard(self, k: int, win_rate: float) -> list[MemoryEntry]:
        """Active entries solved with the hint at a rate ≤ ``win_rate``, newest first."""
        rows = self._db.execute("SELECT * FROM environments WHERE active=1 AND win_rate_with_hint <= ? "
                                "ORDER BY seq DESC LIMIT ?", (win_rate, k)).fetchall()
        return [_entry(r) for r in rows]

    def count(self, active_only: bool = False) -> int:
        query = "SELECT COUNT(*) FROM environments" + (" WHERE active=1" if active_only else "")
        return self._db.execute(query).fetchone()[0]


def _entry(row: sqlite3.Row) -> MemoryEntry:
    data = dict(row)
    data["admitted"], data["active"] = bool(data["admitted"]), bool(data["active"])
    data["extra"] = json.loads(data["extra"])
    return MemoryEntry(**data)
