"""Per-round checksums: a committed round says what it contains, so later damage is detected.

When a round is committed its directory gets ``manifest.json``::

    {"version": 1, "round": 3,
     "files": {"proposal.json": {"sha256": "…", "bytes": 812}, "checkpoint/model.safetensors": …},
     "config": "<fingerprint of config.yaml without rounds>"}

listing every file of the round (whatever the trainer, engineer and testbed wrote; nothing is
assumed about names) with its SHA-256 and size. ``check_round_dir`` compares a directory with
its manifest and returns a ``RoundHealth``:

* a file whose size or hash differs, or that cannot be read, is **damaged**;
* a missing top-level file (a record such as ``eval.json`` or ``state.json``) is damaged; files
  missing inside a top-level directory (e.g. ``checkpoint/``, removed by checkpoint retention,
  ``RunDir.prune_checkpoints``) make that entry **pruned** — the round's records are still
  good, but the run cannot resume from it;
* files the manifest does not know about are ignored (they were not committed);
* a listed path that is absolute or climbs out with ``..``, goes through a symbolic link, or is
  not a regular file (a device, a pipe) is damaged and is never opened or read: the manifest is
  a record of the run dir, and a run dir is not trusted to point outside itself;
* a round without a manifest (written before manifests existed) is **unverified**: its JSON
  files are checked to parse, nothing more can be known.

Hashing streams files in 1 MiB blocks (a checkpoint is read once at commit and once when a
resume verifies it). ``full=False`` checks only the round's top-level files (its records and
state, small), which is how a resume checks every earlier round cheaply.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curriculum.core.safefs import (UnsafePath, check_relative, file_kind, is_plain_file, open_inside,
                                    read_inside)

MANIFEST = "manifest.json"
"""Name of the manifest file inside a round directory."""
MANIFEST_VERSION = 1
_BLOCK = 1 << 20


def fd_digest(fd: int) -> tuple[str, int]:
    """(SHA-256 hex digest, size in bytes) of an open regular file, read in blocks; closes it."""
    h = hashlib.sha256()
    size = 0
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafePath(f"is {file_kind(mode)}, not a regular file")
        while block := os.read(fd, _BLOCK):
            h.update(block)
            size += len(block)
    finally:
        os.close(fd)
    return h.hexdigest(), size


def file_digest(path: Path, *, sync: bool = False) -> tuple[str, int]:
    """(SHA-256 hex digest, size in bytes) of a file, read in blocks; ``sync`` also flushes
    it to disk (the commit needs that, and reading it here costs no second pass)."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK):
            h.update(block)
            size += len(block)
        if sync:
            os.fsync(handle.fileno())
    return h.hexdigest(), size


def build_manifest(directory: Path, round_index: int, **extra: Any) -> dict[str, Any]:
    """The manifest of every file under ``directory`` (except the manifest itself); ``extra``
    keys are stored beside the file list."""
    files: dict[str, dict[str, Any]] = {}
    for item in sorted(directory.rglob("*")):
        rel = item.relative_to(directory).as_posix()
        if is_plain_file(item) and rel not in (MANIFEST, f".{MANIFEST}.tmp"):
            digest, size = file_digest(item, sync=True)
            files[rel] = {"sha256": digest, "bytes": size}
    return {"version": MANIFEST_VERSION, "round": round_index, "files": files, **extra}


def write_manifest(directory: Path, round_index: int, **extra: Any) -> dict[str, Any]:
    """Hash ``directory`` and write its ``manifest.json`` (fsynced)."""
    manifest = build_manifest(directory, round_index, **extra)
    tmp = directory / f".{MANIFEST}.tmp"  # a new inode: the old one may be a hard link
    with open(tmp, "w") as handle:
        json.dump(manifest, handle, indent=1)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, directory / MANIFEST)
    return manifest


@dataclass
class RoundHealth:
    """What ``check_round_dir`` found in one round directory."""

    index: int
    """Round index."""
    damaged: dict[str, str] = field(default_factory=dict)
    """File (relative path) → what is wrong with it."""
    pruned: list[str] = field(default_factory=list)
    """Top-level entries removed on purpose (e.g. ``checkpoint`` by retention)."""
    verified: bool = True
    """The round had a readable manifest (``False``: only JSON parsing could be checked)."""
    files: int = 0
    """Files checked."""

    @property
    def ok(self) -> bool:
        """Nothing damaged (pruned entries are fine for the round's records)."""
        return not self.damaged

    def damaged_outside(self, entries: tuple[str, ...]) -> dict[str, str]:
        """Damage in files that are not under one of the top-level ``entries``."""
        return {f: why for f, why in self.damaged.items() if f.split("/", 1)[0] not in entries}

    @property
    def resumable(self) -> bool:
        """Everything the round committed is present and intact."""
        return not self.damaged and not self.pruned

    def describe(self) -> str:
        if self.damaged:
            return "; ".join(f"{f}: {why}" for f, why in sorted(self.damaged.items()))
        parts = ["intact" if self.verified else "no manifest (JSON files parse)"]
        if self.pruned:
            parts.append("pruned: " + ", ".join(f"{p}/" for p in self.pruned)
                         + " (cannot resume from this round)")
        return ", ".join(parts)


MAX_RECORD_BYTES = 256 << 20
"""Largest JSON record of a round that is read (a manifest, a round's records)."""


def _json_problem(path: Path) -> str | None:
    try:
        json.loads(read_inside(path.parent, path.name, MAX_RECORD_BYTES))
    except UnsafePath as err:
        return _reason(err, path)
    except (ValueError, RecursionError) as exc:  # bad UTF-8 is a ValueError too
        return f"is not valid JSON ({str(exc)[:80]})"
    return None


def _reason(err: UnsafePath, path: Path) -> str:
    """``err``'s message without the path (the finding names the file already)."""
    text = str(err)
    for prefix in (f"{path}: ", f"file {path} "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """A round's manifest, ``None`` if absent or unreadable."""
    return _load_manifest(directory)[0]


def _load_manifest(directory: Path) -> tuple[dict[str, Any] | None, str | None]:
    path = directory / MANIFEST
    if not os.path.lexists(path):
        return None, None
    problem = _json_problem(path)
    if problem is None:
        manifest = json.loads(read_inside(directory, MANIFEST, MAX_RECORD_BYTES))
        files = manifest.get("files") if isinstance(manifest, dict) else None
        if isinstance(files, dict) and all(
                isinstance(v, dict) and isinstance(v.get("sha256"), str)
                and isinstance(v.get("bytes"), int) for v in files.values()):
            return manifest, None
        problem = "is not a round manifest"
    return None, problem


def check_round_dir(directory: Path, index: int, *, full: bool = True) -> RoundHealth:
    """Compare a round directory with its manifest (see the module docstring)."""
    health = RoundHealth(index)
    manifest, problem = _load_manifest(directory)
    if problem is not None:
        health.damaged[MANIFEST] = problem
        return health
    if manifest is None:
        health.verified = False
        for path in sorted(directory.glob("*.json")):
            health.files += 1
            why = _json_problem(path)
            if why is not None:
                health.damaged[path.name] = why
        return health
    pruned: set[str] = set()
    for rel, entry in manifest["files"].items():
        try:
            check_relative(rel)
        except UnsafePath:
            health.damaged[rel[:200]] = "is listed by the manifest but not a path inside the round dir"
            continue
        top = rel.split("/", 1)[0]
        if top in pruned or (not full and "/" in rel):
            continue
        try:  # no link below the round dir is followed; a device or pipe is not read
            fd = open_inside(directory, rel, os.O_RDONLY | os.O_NONBLOCK)
            health.files += 1
            digest, size = fd_digest(fd)
        except UnsafePath as err:
            if err.missing and "/" in rel:
                pruned.add(top)  # weights thinned or removed (retention), not a record lost
            else:
                health.damaged[rel] = "is missing" if err.missing else _reason(err, directory / rel)
            continue
        except OSError as exc:
            health.damaged[rel] = f"cannot be read ({exc.strerror or exc})"
            continue
        if size != entry["bytes"] or digest != entry["sha256"]:
            health.damaged[rel] = (f"does not match its checksum ({size} bytes, committed "
                                   f"{entry['bytes']}): damaged after the round was committed")
    health.pruned = sorted(pruned)
    return health
