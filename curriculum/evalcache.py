"""Held-out evals computed once: a content-addressed cache of ``EvalReport``s.

A greedy eval is a pure function of the policy's weights, the suite's tasks, the generation
settings and the code that scores it. ``compare`` evaluates the same starting model (the
shipped model, the cached warm start) once per seed and arm, and a rerun evaluates it again:
this cache stores each report under

    key = sha256(trainer.eval_identity(seed)  weights digest, generation settings, precision,
                                              engine; the seed only where the eval samples
                 testbed.eval_identity(suite) the suite's tasks by content, the scoring settings
                 code fingerprint)            the source of curriculum/, testbeds/ and trainers/

in ``$CURRICULUM_CACHE/evals/<key>.json`` (``$CURRICULUM_EVAL_CACHE`` names another folder), so any change to what decides the result recomputes
it. A trainer or testbed that cannot state its identity (``None``) is never cached. A file lock
per key makes concurrent runs (``compare --jobs 2``) compute one key once; entries are written
atomically, and an entry that does not read back as a report is recomputed and replaced.
``eval_cache: false`` in the run config turns the cache off.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from curriculum.core.paths import cache_dir
from curriculum.core.types import EvalReport

_PACKAGES = ("curriculum", "testbeds", "trainers")
"""Packages whose source decides an eval's result (engineers never take part in one)."""


@functools.cache
def code_fingerprint() -> str:
    """sha256 over the path and bytes of every ``.py`` file of ``_PACKAGES`` (computed once per
    process): a code change anywhere in them invalidates every cached eval."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for package in _PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def eval_key(policy_identity: str | None, suite_identity: str | None) -> str | None:
    """The cache key of one eval (module docstring); ``None`` when either side is unknown."""
    if policy_identity is None or suite_identity is None:
        return None
    blob = json.dumps({"policy": policy_identity, "suite": suite_identity, "code": code_fingerprint()},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def cached_eval(key: str | None, compute: Callable[[], EvalReport],
                root: Path | None = None) -> tuple[EvalReport, bool]:
    """``(report, reused)``: the stored report of ``key``, else ``compute()`` stored under it.
    ``key=None`` computes without the cache."""
    if key is None:
        return compute(), False
    folder = root or Path(os.environ.get("CURRICULUM_EVAL_CACHE") or cache_dir("evals"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key}.json"
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent run with this key waits, then reads ours
        stored = _read(path)
        if stored is not None:
            return stored, True
        report = compute()
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(report.model_dump(mode="json")))
        os.replace(tmp, path)
    return report, False


def _read(path: Path) -> EvalReport | None:
    """The report stored at ``path``; ``None`` when missing or unreadable (then recomputed)."""
    try:
        return EvalReport.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None
