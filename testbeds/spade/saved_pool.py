"""The pool a SPADE run's engineer last handed on, saved in its run directory.

``save_pool`` / ``load_pool`` keep it as ``POOL_FILE`` (JSON lines, one
``curriculum.core.pool.PoolEnvironment`` per line), which ``testbed.initial_pool: memory:DIR``
reads to start a later run from it. The engineer writes it; the testbed and ``curriculum spade``
read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from curriculum.core.pool import PoolEnvironment, read_pool_file, write_pool_file

POOL_FILE = "spade_pool.jsonl"
"""The pool a run's engineer last handed on, one ``PoolEnvironment`` per line."""


def save_pool(directory: str | Path, envs: Iterable[PoolEnvironment]) -> Path:
    """Write ``directory/POOL_FILE`` atomically (temporary file, then rename)."""
    return write_pool_file(Path(directory) / POOL_FILE, envs)


def load_pool(directory: str | Path) -> list[PoolEnvironment]:
    """The pool saved by ``save_pool``; FileNotFoundError naming the file when there is none."""
    path = Path(directory) / POOL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: {directory} is not the run directory of a SPADE run "
                                "whose engineer designed at least once")
    return read_pool_file(path)
