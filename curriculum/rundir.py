"""The run directory: atomic per-round commits and exact resume.

Layout::

    RUN/
      config.yaml               resolved config (resume refuses a different one)
      metrics.jsonl             one JSON record per training log / round event
      baseline_eval.json        optional eval of the starting model
      rounds/round_000/         one directory per *completed* round:
        proposal.json           what this round trained on
        train_metrics.json
        eval.json               EvalReport
        design.json             DesignRecord: engineer input/output, projected proposal, changes
        engineer_prompt.txt     what the engineer's model read (when it used one)
        engineer_output.txt     what it wrote
        state.json              engineer + testbed state, RNG states, next proposal
        checkpoint/             model weights (+ optimizer state)

A round is written into ``rounds/.round_NNN.partial`` (``begin_round``, then the checkpoint)
and renamed into place by ``finish_round``; a rename is atomic on POSIX, so a round directory either exists complete or not at all. A run killed
mid-round loses only that round; a resume deletes leftover ``.partial`` directories and
continues after the last committed round, leaving committed rounds byte-for-byte untouched.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from curriculum.config import ConfigError, RunConfig, config_diff, dump_config, validate_config
from curriculum.records import RoundReport


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and rename."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_json(path: Path, value: Any) -> None:
    atomic_write(path, json.dumps(value, indent=2, sort_keys=False, default=str) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def capture_rng() -> dict[str, Any]:
    """Python, NumPy and torch global RNG states (JSON-able)."""
    state: dict[str, Any] = {
        "python": _to_jsonable(random.getstate()),
        "numpy": _to_jsonable(np.random.get_state()),
    }
    try:
        import torch

        state["torch"] = torch.get_rng_state().tolist()
    except ImportError:  # torch-free runs (simulated learner)
        pass
    return state


def restore_rng(state: dict[str, Any]) -> None:
    if "python" in state:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in state:
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    if "torch" in state:
        import torch

        torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))


def _to_jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple | list):
        return [_to_jsonable(v) for v in value]
    return value


class RunDir:
    """A run directory on disk."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    # -- creation and resume ------------------------------------------------------------------
    @classmethod
    def create(cls, config: RunConfig) -> RunDir:
        name = config.run_name or "{}-{}-seed{}-{}".format(
            config.engineer.name, config.testbed.name, config.seed,
            datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S"),
        )
        path = Path(config.output_dir) / name
        if (path / "config.yaml").exists():
            raise ConfigError(f"run directory {path} already exists; resume it with "
                              f"`curriculum run --resume {path}` or choose another run_name")
        (path / "rounds").mkdir(parents=True, exist_ok=True)
        run = cls(path)
        atomic_write(path / "config.yaml", dump_config(config))
        return run

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        run = cls(Path(path))
        if not (run.path / "config.yaml").is_file():
            raise ConfigError(f"{path} is not a run directory (no config.yaml)")
        return run

    def saved_config(self) -> RunConfig:
        data = yaml.safe_load((self.path / "config.yaml").read_text())
        return validate_config(data, source=str(self.path / "config.yaml"))

    def check_same_config(self, config: RunConfig) -> None:
        """Refuse to resume with a config that differs from the saved one."""
        saved = yaml.safe_load((self.path / "config.yaml").read_text())
        diff = config_diff(saved, config.model_dump(mode="json"))
        if diff:
            raise ConfigError(
                f"cannot resume {self.path}: the config differs from the saved one:\n  "
                + "\n  ".join(diff)
                + "\nResume without --config/--set to use the saved config, or start a new run."
            )

    def lock(self) -> None:
        """Hold an exclusive lock on the run dir for this process's lifetime.

        Two processes writing one run dir (a resume started while an orphaned worker of a killed
        run is still going) would corrupt it; the kernel drops the lock when the holder dies.
        """
        import fcntl

        handle = open(self.path / ".lock", "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise ConfigError(f"{self.path} is in use by another run (pid {holder}); "
                              "stop it before resuming") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock_handle = handle  # closing it (or dying) releases the lock

    def unlock(self) -> None:
        """Release the lock now (objects of a finished run may outlive it in reference cycles)."""
        handle = getattr(self, "_lock_handle", None)
        if handle is not None:
            handle.close()
            self._lock_handle = None

    # -- rounds -------------------------------------------------------------------------------
    @property
    def rounds_dir(self) -> Path:
        return self.path / "rounds"

    def round_dir(self, index: int) -> Path:
        return self.rounds_dir / f"round_{index:03d}"

    def completed_rounds(self) -> list[int]:
        if not self.rounds_dir.is_dir():
            return []
        return sorted(int(p.name.split("_")[1]) for p in self.rounds_dir.glob("round_[0-9][0-9][0-9]")
                      if p.is_dir())

    def discard_partial(self) -> None:
        """Remove rounds that were being written when a run died."""
        for partial in self.rounds_dir.glob(".round_*.partial"):
            shutil.rmtree(partial, ignore_errors=True)

    def partial_dir(self, index: int) -> Path:
        return self.rounds_dir / f".round_{index:03d}.partial"

    def begin_round(self, report: RoundReport, *, state: dict[str, Any]) -> Path:
        """Write a round's records into its partial directory (checkpoint goes in next)."""
        partial = self.partial_dir(report.round)
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        write_json(partial / "proposal.json", report.proposal)
        write_json(partial / "train_metrics.json", report.train_metrics)
        write_json(partial / "eval.json", report.eval.model_dump(mode="json"))
        if report.design is not None:
            write_json(partial / "design.json", report.design.model_dump(mode="json"))
            if report.design.design.prompt is not None:
                atomic_write(partial / "engineer_prompt.txt", report.design.design.prompt)
            if report.design.design.output is not None:
                atomic_write(partial / "engineer_output.txt", report.design.design.output)
        write_json(partial / "state.json", state)
        return partial

    def finish_round(self, index: int) -> Path:
        """Make the partial round visible with one atomic rename."""
        partial, final = self.partial_dir(index), self.round_dir(index)
        _fsync_tree(partial)
        os.rename(partial, final)
        _fsync_dir(self.rounds_dir)
        return final

    def load_round(self, index: int) -> RoundReport:
        directory = self.round_dir(index)
        design_path = directory / "design.json"
        return RoundReport.model_validate({
            "round": index,
            "proposal": read_json(directory / "proposal.json"),
            "train_metrics": read_json(directory / "train_metrics.json"),
            "eval": read_json(directory / "eval.json"),
            "design": read_json(design_path) if design_path.is_file() else None,
        })

    def load_state(self, index: int) -> dict[str, Any]:
        return read_json(self.round_dir(index) / "state.json")

    def history(self) -> list[RoundReport]:
        return [self.load_round(i) for i in self.completed_rounds()]

    def checkpoint(self, index: int) -> Path | None:
        path = self.round_dir(index) / "checkpoint"
        return path if path.is_dir() else None

    # -- checkpoint retention -----------------------------------------------------------------
    @property
    def retention_path(self) -> Path:
        return self.path / "pruned_checkpoints.json"

    def pruned_rounds(self) -> list[int]:
        """Rounds whose checkpoint was removed by ``prune_checkpoints``."""
        if not self.retention_path.is_file():
            return []
        try:
            return sorted(int(i) for i in read_json(self.retention_path))
        except (ValueError, TypeError):
            return []

    def prune_checkpoints(self, keep: int) -> list[int]:
        """Delete the checkpoints of all committed rounds but the last ``keep``; returns the
        rounds pruned now. Their records stay; ``pruned_checkpoints.json`` lists them first, so
        a kill mid-deletion leaves a round marked pruned, never a half checkpoint in use."""
        rounds = self.completed_rounds()
        doomed = [i for i in rounds[:-keep] if self.checkpoint(i) is not None] if keep < len(rounds) else []
        if not doomed:
            return []
        write_json(self.retention_path, sorted({*self.pruned_rounds(), *doomed}))
        for index in doomed:
            shutil.rmtree(self.round_dir(index) / "checkpoint")
        return doomed

    # -- metrics stream -----------------------------------------------------------------------
    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    def log(self, record: dict[str, Any]) -> None:
        with open(self.metrics_path, "a") as handle:
            handle.write(json.dumps(record, default=float) + "\n")

    def truncate_metrics(self, last_round: int) -> None:
        """Drop metrics of rounds after ``last_round`` (they belong to a round that was lost)."""
        if not self.metrics_path.is_file():
            return
        kept = []
        for line in self.metrics_path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill
            if record.get("round", -1) <= last_round:
                kept.append(line)
        atomic_write(self.metrics_path, "".join(k + "\n" for k in kept))


def _fsync_tree(path: Path) -> None:
    """Flush every file of a round (checkpoints are written by libraries that do not fsync)."""
    for item in path.rglob("*"):
        if item.is_file():
            fd = os.open(item, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    _fsync_dir(path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
