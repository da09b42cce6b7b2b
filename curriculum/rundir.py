"""The run directory: atomic per-round commits and exact resume.

Layout::

    RUN/
      config.yaml               resolved config (resume refuses a different one)
      metrics.jsonl             one JSON record per training log / round event
      engine.log                the engines' own logs and warnings (``curriculum.enginelog``)
      baseline_eval.json        optional eval of the starting model (validation suite)
      baseline_test_eval.json   the same on the test suite (testbeds that have one)
      rounds/round_000/         one directory per *completed* round:
        proposal.json           what this round trained on
        train_metrics.json
        eval.json               EvalReport on the validation suite (what engineers read)
        test_eval.json          EvalReport on the test suite (what reports score on), when run
        env_outcomes.json       per-environment play results, when the trainer has any
        design.json             DesignRecord: engineer input/output, projected proposal, changes
        engineer_prompt.txt     what the engineer's model read (when it used one)
        engineer_output.txt     what it wrote
        state.json              engineer + testbed state, RNG states, next proposal
        checkpoint/             model weights (+ optimizer state)
        manifest.json           SHA-256 and size of every file above (``curriculum.manifest``)

A round is written into ``rounds/.round_NNN.partial`` (``begin_round``, then the checkpoint)
and renamed into place by ``finish_round`` after its manifest is written; a rename is atomic
on POSIX, so a round directory either exists complete or not at all. A run killed mid-round
loses only that round; a resume deletes leftover ``.partial`` directories and continues after
the last committed round, leaving committed rounds byte-for-byte untouched.

Damage after commit (a disk, an editor, a partial copy) is caught by the manifests
(``plan_resume``): a resume checks every round's records and the last round in full. If the last
round is damaged it says which file and why, moves that round aside to
``rounds/.round_NNN.damaged`` (kept, never deleted) and resumes from the newest round before it
that is intact — including its checkpoint, so when retention has pruned older rounds' weights
it says that it cannot fall back further and refuses. Damaged records of an earlier round
(which every engineer reads through the history) make the resume fall back to before them.
Rounds must be contiguous from 0: after a gap (a missing ``round_NNN``, or a file in its place)
every later round is dropped the same way (moved aside, run again), since each round continues
from the one before it. A resume decides all this before it writes anything: the config of an
extension is saved only once the plan allows the resume, and ``truncate_metrics`` then makes each
committed round's ``round_committed`` record agree with the round's files.
``curriculum doctor RUN`` prints the same verdict without changing anything.

Extending a finished run (``--resume RUN --rounds N`` with a larger N) asks the engineer for the
design its last round skipped and re-commits that round with ``amend_round``: the new round
directory is built beside the old one from hard links plus the new design and state files, and
swapped in by two renames; a resume after a crash between them restores the old directory.

A fork (``RunDir.fork``, for ``compare``'s shared round 0) is a new run dir whose round 0 is
hard-linked from a one-round stem run, with its own engineer state and manifest; its first
resume asks the engineer for the design the stem skipped, as an extension does.

Ownership: a run takes the directory's ``.lock`` (``flock``) before it writes anything, a fresh
run included, and whatever decides that a directory is free (a new run, ``compare``'s claim of a
run it judged new, a fork) decides it again under that lock. ``.lock`` is opened inside the
directory without following a link (``curriculum.core.safefs.open_inside``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import stat
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from curriculum.config import (MAX_CONFIG_BYTES, ConfigError, RunConfig, check_expanded_size,
                               config_diff, dump_config, validate_config)
from curriculum.manifest import (MAX_RECORD_BYTES, RoundHealth, check_round_dir, read_manifest,
                                 write_manifest)
from curriculum.core.records import RoundReport
from curriculum.core.safefs import (UnsafePath, is_plain_dir, is_plain_file, open_inside,
                                    read_inside)
from curriculum.core.userfiles import Record, jsonl_records

RESUME_STATE = ("state.json", "checkpoint")
"""Round entries needed only to resume from that round; every other file is a record that the
history (what engineers read) needs."""


LOCATION_KEYS = ("output_dir", "run_name")
"""Config keys that say where a run directory lives, not what it computes (``extends_config``)."""


class RunDirError(ConfigError):
    """A run directory that cannot be used as asked; the message says which file and why."""


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and rename."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # no stray temporary file beside a write that failed
        raise


def write_json(path: Path, value: Any) -> None:
    atomic_write(path, json.dumps(value, indent=2, sort_keys=False, default=str) + "\n")


def finite_json(value: Any) -> Any:
    """``value`` with every non-finite float (an unbounded interval, an unmeasurable effect) as
    ``None``: strict JSON, which ``json.dumps`` would otherwise write as ``Infinity`` or ``NaN``
    and strict parsers (``jq``, JavaScript) refuse."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def read_json(path: Path) -> Any:
    """A run-dir JSON file; ``RunDirError`` naming the file if it cannot be read or parsed. The
    file itself is opened without following a link, must be a regular file and is read up to
    ``MAX_RECORD_BYTES`` (``curriculum.core.safefs``)."""
    try:
        return json.loads(read_inside(path.parent, path.name, MAX_RECORD_BYTES, what="record"))
    except UnsafePath as err:
        if err.missing:
            raise RunDirError(f"{path} is missing") from None
        raise RunDirError(f"{err} (damaged or replaced); `curriculum doctor RUN` reports the "
                          "run's health") from None
    except (ValueError, RecursionError) as exc:
        raise RunDirError(f"{path} is damaged (not valid JSON: {str(exc)[:80]}); "
                          "`curriculum doctor RUN` reports the run's health") from None


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


def _fingerprint_data(data: dict[str, Any]) -> str:
    data = {k: v for k, v in data.items() if k != "rounds"}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _fingerprint(config_yaml: str) -> str:
    """The fingerprint ``RunDir.config_fingerprint`` gives a ``config.yaml`` holding this text."""
    return _fingerprint_data(yaml.safe_load(config_yaml))


def run_path(config: RunConfig) -> Path:
    """Where a config with an explicit ``run_name`` keeps its run directory."""
    return Path(config.output_dir) / str(config.run_name)


class RunDir:
    """A run directory on disk."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.fresh = True
        """False when ``create(claim=True)`` found a run here already (to be resumed)."""
        self._lock_handle: Any = None

    # -- creation and resume ------------------------------------------------------------------
    @classmethod
    def create(cls, config: RunConfig, *, claim: bool = False) -> RunDir:
        """A new run directory for ``config``, locked before anything is written in it.

        Whether the name is free is decided under the lock, so two runs started with one name
        cannot both write it: the second is refused (in use, or already holding a run).
        ``claim`` (``compare``'s workers) instead takes over a directory that holds no run yet
        (leftovers of a start that never wrote its config are removed) and returns a directory
        that does hold one still locked, with ``fresh`` False, for the caller to resume."""
        name = config.run_name or "{}-{}-seed{}-{}".format(
            config.engineer.name, config.testbed.name, config.seed,
            datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S"),
        )
        path = Path(config.output_dir) / name
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirError(creation_problem(path, Path(config.output_dir), exc)) from None
        run = cls(path)
        run.lock()
        try:
            if os.path.lexists(path / "config.yaml"):
                if claim:
                    run.fresh = False
                    return run
                raise ConfigError(f"run directory {path} already exists; resume it with "
                                  f"`curriculum run --resume {path}` or choose another run_name")
            if claim:
                run.clear_leftovers()
            (path / "rounds").mkdir(exist_ok=True)
            atomic_write(path / "config.yaml", dump_config(config))
        except OSError as exc:
            run.unlock()
            raise RunDirError(creation_problem(path, Path(config.output_dir), exc)) from None
        except BaseException:
            run.unlock()
            raise
        return run

    def clear_leftovers(self) -> None:
        """Remove everything but the lock from a directory that holds no run (no config.yaml):
        what a start killed before its config left. Only under this process's lock."""
        assert getattr(self, "_lock_handle", None) is not None, "clear_leftovers needs the lock"
        for entry in os.listdir(self.path):
            if entry == ".lock":
                continue
            target = self.path / entry
            if is_plain_dir(target):
                shutil.rmtree(target)
            else:
                target.unlink()

    @classmethod
    def fork(cls, stem: RunDir, config: RunConfig, *, engineer_state: dict[str, Any]) -> RunDir:
        """A new run dir for ``config`` that starts after ``stem``'s committed round 0.

        ``stem`` is a finished one-round run whose config equals ``config`` except the engineer
        (and the name and round count), so its round 0 is exactly what this run's round 0 would
        compute when round 0 does not depend on the engineer (``curriculum.stem``). The round
        directory is hard-linked, its ``state.json`` gets this run's fresh ``engineer_state`` and
        its manifest this config's fingerprint; round 0's design is then asked on the first
        resume, as when extending a finished run (``loop._extend``). The new directory appears
        directory is locked first and gets its ``config.yaml`` last, so a killed fork leaves no
        run behind (its leftovers are cleared by the next claim) and never touches a live run."""
        if stem.completed_rounds() != [0] or stem.checkpoint(0) is None:
            raise RunDirError(f"{stem.path} is not a finished one-round run with its weights kept")
        if stem.load_round(0).design is not None:
            raise RunDirError(f"{stem.path}: round 0 already has a design; a stem must skip it")
        run = cls.create(config, claim=True)
        if run.completed_rounds():
            run.unlock()
            raise ConfigError(f"run directory {run.path} already exists; it cannot be forked again")
        try:
            run.clear_leftovers()  # nothing committed (a start killed before its first round)
            (run.path / "rounds").mkdir()
            for name in ("baseline_eval.json", "baseline_test_eval.json", "warmstart.json",
                         "warmstart_eval.json", "warmstart_test_eval.json"):
                if is_plain_file(stem.path / name):
                    _link_or_copy(str(stem.path / name), str(run.path / name))
            if is_plain_file(stem.metrics_path):  # appended to later: a copy, never a link
                shutil.copy2(stem.metrics_path, run.metrics_path)
            target = run.round_dir(0)
            tmp = run.rounds_dir / ".round_000.partial"
            shutil.copytree(stem.round_dir(0), tmp, copy_function=_link_or_copy)
            state = stem.load_state(0)
            state["engineer"] = engineer_state
            write_json(tmp / "state.json", state)  # a new inode: the stem's file is untouched
            write_manifest(tmp, 0, config=_fingerprint(dump_config(config)))
            _fsync_dir(tmp)
            os.rename(tmp, target)
            write_json(run.path / "forked_from.json", {"stem": str(stem.path.resolve()), "rounds": [0]})
            atomic_write(run.path / "config.yaml", dump_config(config))
            _fsync_dir(run.path)
        finally:
            run.unlock()
        return cls(run.path)

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        run = cls(Path(path))
        if not os.path.lexists(run.path / "config.yaml"):  # what it is is checked when read
            raise ConfigError(f"{path} is not a run directory (no config.yaml)")
        return run

    def _saved_config_data(self) -> dict[str, Any]:
        path = self.path / "config.yaml"
        try:  # what a run saves is a config under the cap plus defaults
            raw = read_inside(self.path, "config.yaml", 4 * MAX_CONFIG_BYTES, what="saved config")
        except UnsafePath as err:
            raise RunDirError(f"{err} (damaged or replaced); it is not read") from None
        try:
            data = yaml.safe_load(raw)
        except (yaml.YAMLError, ValueError, RecursionError) as exc:
            raise RunDirError(f"{path} is damaged (not valid YAML: {str(exc)[:120]}); "
                              "the run's config cannot be recovered from it") from None
        if not isinstance(data, dict):
            raise RunDirError(f"{path} is damaged (not a mapping)")
        try:
            check_expanded_size(data, str(path))
        except ConfigError as err:
            raise RunDirError(f"{err} (damaged or edited)") from None
        return data

    def config_fingerprint(self) -> str:
        """SHA-256 of the saved config without ``rounds`` (which an extension may raise); every
        round's manifest stores it, so a damaged but still valid ``config.yaml`` is noticed."""
        return _fingerprint_data(self._saved_config_data())

    def check_config(self) -> str | None:
        """Why ``config.yaml`` cannot be trusted, or ``None``: it must parse, validate and
        match the fingerprint in the newest round manifest that has one."""
        try:
            self.saved_config()
            fingerprint = self.config_fingerprint()
        except ConfigError as err:
            return str(err)
        for index in reversed(self.completed_rounds()):
            manifest = read_manifest(self.round_dir(index))
            if manifest is not None and isinstance(manifest.get("config"), str):
                if manifest["config"] != fingerprint:
                    return (f"{self.path / 'config.yaml'} differs from the config round {index} "
                            "was committed with (damaged or edited after commit)")
                return None
        return None

    def saved_config(self) -> RunConfig:
        try:
            return validate_config(self._saved_config_data(), source=str(self.path / "config.yaml"))
        except RunDirError:
            raise
        except ConfigError as err:
            raise RunDirError(f"{self.path / 'config.yaml'} no longer validates:\n{err}") from None

    def check_same_config(self, config: RunConfig) -> bool:
        """Refuse to resume with a config that differs from the saved one, except a larger
        ``rounds`` (extending the run): then save the new config and return ``True``."""
        if self.extends_config(config):
            self.save_config(config)
            return True
        return False

    def save_config(self, config: RunConfig) -> None:
        """Replace ``config.yaml`` (an extension's larger round count), atomically."""
        atomic_write(self.path / "config.yaml", dump_config(config))

    def extends_config(self, config: RunConfig) -> bool:
        """``True`` when ``config`` is the saved one with a larger ``rounds`` (an extension),
        ``False`` when it is the same; ``ConfigError`` naming the differing keys otherwise.
        Writes nothing: a resume saves the config only once it has decided it can proceed."""
        saved = self._saved_config_data()
        try:
            # Read the saved config with today's schema: a field added since the run was saved
            # takes its default on both sides, so it is no difference (new options default to
            # the old behaviour). A field that no longer exists still fails loudly below.
            saved = self.saved_config().model_dump(mode="json")
        except ConfigError:
            pass
        # Where the run lives is no part of what it computes: a run dir moved or copied to another
        # --out (a comparison gathered from several machines) resumes and is reused there.
        new = {k: v for k, v in config.model_dump(mode="json").items() if k not in LOCATION_KEYS}
        diff = config_diff({k: v for k, v in saved.items() if k not in LOCATION_KEYS}, new)
        before = saved.get("rounds")
        if diff == [f"rounds: {before!r} -> {config.rounds!r}"]:
            if isinstance(before, int) and config.rounds > before:
                return True
            diff = [diff[0] + " (only a larger round count can extend a run)"]
        if diff:
            raise ConfigError(
                f"cannot resume {self.path}: the config differs from the saved one:\n  "
                + "\n  ".join(diff)
                + "\nResume without --config/--set to use the saved config (a larger --rounds "
                "extends the run), or start a new run."
            )
        return False

    def lock(self) -> None:
        """Hold an exclusive lock on the run dir for this process's lifetime.

        Two processes writing one run dir (a resume started while an orphaned worker of a killed
        run is still going) would corrupt it; the kernel drops the lock when the holder dies.
        ``.lock`` is opened inside the run dir without following a link (``open_inside``): a
        link or anything but a plain file there is refused, never truncated. Taking a lock this
        object holds already is a no-op.
        """
        import fcntl

        if getattr(self, "_lock_handle", None) is not None:
            return
        try:
            fd = open_inside(self.path, ".lock", os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o644)
        except UnsafePath as err:
            raise RunDirError(f"the run's lock cannot be taken: {err} (a run needs write access "
                              "to its directory and a plain .lock file; `curriculum doctor` "
                              "reads it without)") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise RunDirError(f"{self.path / '.lock'} is not a plain file; remove it")
        handle = os.fdopen(fd, "r+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read(40).strip() or "unknown"
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
                      if is_plain_dir(p))

    def stray_round_entries(self) -> list[Path]:
        """``rounds/round_NNN`` entries that are not directories (a file or a link, dangling or
        not, in a round's place: a run dir's rounds are never followed out of it): no round, and
        in the way of the round that will be committed there."""
        if not self.rounds_dir.is_dir():
            return []
        return sorted(p for p in self.rounds_dir.glob("round_[0-9][0-9][0-9]") if not is_plain_dir(p))

    def discard_partial(self) -> None:
        """Remove rounds that were being written when a run died, and finish or undo an
        ``amend_round`` that a crash interrupted between its two renames."""
        for replaced in self.rounds_dir.glob(".round_[0-9][0-9][0-9].replaced"):
            final = self.rounds_dir / replaced.name[1:-len(".replaced")]
            if final.exists():
                shutil.rmtree(replaced, ignore_errors=True)
            else:
                os.rename(replaced, final)
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
        if report.test is not None:
            write_json(partial / "test_eval.json", report.test.model_dump(mode="json"))
        if report.env_outcomes:
            write_json(partial / "env_outcomes.json", [o.model_dump(mode="json") for o in report.env_outcomes])
        _write_design(partial, report)
        write_json(partial / "state.json", state)
        return partial

    def finish_round(self, index: int) -> Path:
        """Write the partial round's manifest and make it visible with one atomic rename."""
        partial, final = self.partial_dir(index), self.round_dir(index)
        write_manifest(partial, index, config=self.config_fingerprint())  # reads + fsyncs each file
        _fsync_dir(partial)
        os.rename(partial, final)
        _fsync_dir(self.rounds_dir)
        return final

    def amend_round(self, report: RoundReport, *, state: dict[str, Any]) -> Path:
        """Re-commit a committed round with a new design and state (the other files, checkpoint
        included, are hard-linked, not copied); see the module docstring for crash safety."""
        index = report.round
        final, partial = self.round_dir(index), self.partial_dir(index)
        replaced = self.rounds_dir / f".round_{index:03d}.replaced"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(final, partial, copy_function=_link_or_copy)
        _write_design(partial, report)
        write_json(partial / "state.json", state)
        write_manifest(partial, index, config=self.config_fingerprint())
        _fsync_dir(partial)
        os.rename(final, replaced)
        os.rename(partial, final)
        _fsync_dir(self.rounds_dir)
        shutil.rmtree(replaced)
        return final

    # -- integrity -----------------------------------------------------------------------------
    def check_round(self, index: int, *, full: bool = True) -> RoundHealth:
        """A committed round against its manifest (``full=False``: top-level files only)."""
        return check_round_dir(self.round_dir(index), index, full=full)

    def plan_resume(self, checked: dict[int, RoundHealth] | None = None) -> ResumePlan:
        """Where a resume can continue from, checking nothing more than it must: every round's
        records, then rounds in full from the newest down until one is intact (``checked``:
        full checks already done, reused)."""
        rounds = self.completed_rounds()
        gap = next((position for position, index in enumerate(rounds) if index != position), None)
        after_gap: list[int] = []
        if gap is not None:  # a missing round: nothing after it can be resumed from
            rounds, after_gap = rounds[:gap], rounds[gap:]
        if not rounds:
            return ResumePlan(None, after_gap, {}, gap=gap)
        checked = checked or {}
        records = {i: checked.get(i) or self.check_round(i, full=False) for i in rounds}
        bad_records = [i for i in rounds if records[i].damaged_outside(RESUME_STATE)]
        usable = [i for i in rounds if not bad_records or i < bad_records[0]]
        health = {i: h for i, h in records.items() if i not in usable}
        for index in reversed(usable):
            health[index] = checked.get(index) or self.check_round(index)
            if health[index].resumable:
                kept = {i: h for i, h in records.items() if i < index and h.damaged}
                health.update(kept)
                return ResumePlan(index, [i for i in rounds if i > index] + after_gap, health,
                                  gap=gap)
        return ResumePlan(None, rounds + after_gap, health, refused=True, gap=gap)

    def apply_resume_plan(self, plan: ResumePlan) -> list[str]:
        """Move the rounds a plan drops aside (``.round_NNN.damaged``, kept) and say what happened;
        ``RunDirError`` with the reasons when nothing intact remains."""
        if plan.refused:
            raise RunDirError(plan.explain(self.path))
        strays = []
        for stray in self.stray_round_entries():
            target = self.rounds_dir / f".{stray.name}.damaged"
            n = 1
            while target.exists() or target.is_symlink():
                n += 1
                target = self.rounds_dir / f".{stray.name}.damaged-{n}"
            os.rename(stray, target)
            strays.append(f"rounds/{stray.name} is not a round directory: moved aside to {target.name}")
        notes = strays + [f"round {i}: {h.describe()} (needed only to resume from that round; kept as is)"
                 for i, h in sorted(plan.health.items())
                 if plan.last is not None and i < plan.last and h.damaged]
        if not plan.dropped:
            return notes
        for index in plan.dropped:
            target = self.rounds_dir / f".round_{index:03d}.damaged"
            n = 1
            while target.exists():
                n += 1
                target = self.rounds_dir / f".round_{index:03d}.damaged-{n}"
            os.rename(self.round_dir(index), target)
        _fsync_dir(self.rounds_dir)
        return notes + [plan.explain(self.path)]

    def load_round(self, index: int) -> RoundReport:
        directory = self.round_dir(index)
        design_path, outcomes_path = directory / "design.json", directory / "env_outcomes.json"
        test_path = directory / "test_eval.json"
        return RoundReport.model_validate({
            "round": index,
            "proposal": read_json(directory / "proposal.json"),
            "train_metrics": read_json(directory / "train_metrics.json"),
            "eval": read_json(directory / "eval.json"),
            "test": read_json(test_path) if os.path.lexists(test_path) else None,
            "env_outcomes": read_json(outcomes_path) if os.path.lexists(outcomes_path) else [],
            "design": read_json(design_path) if os.path.lexists(design_path) else None,
        })

    def load_state(self, index: int) -> dict[str, Any]:
        return read_json(self.round_dir(index) / "state.json")

    def history(self) -> list[RoundReport]:
        return [self.load_round(i) for i in self.completed_rounds()]

    def checkpoint(self, index: int) -> Path | None:
        path = self.round_dir(index) / "checkpoint"
        return path if is_plain_dir(path) else None

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
        """Append one record to ``metrics.jsonl`` (never through a link)."""
        fd = open_inside(self.path, "metrics.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        with os.fdopen(fd, "a") as handle:
            handle.write(json.dumps(record, default=float) + "\n")

    def replace_odd_metrics(self) -> str | None:
        """Replace a ``metrics.jsonl`` that is a link or a device with an empty plain file (the
        link itself, never its target; ``truncate_metrics`` then rebuilds the committed rounds'
        records); returns what was done, or ``None``."""
        if not os.path.lexists(self.metrics_path) or is_plain_file(self.metrics_path):
            return None
        atomic_write(self.metrics_path, "")
        return ("metrics.jsonl was not a plain file (a link or a device): replaced, and its round "
                "records rebuilt from the committed rounds")

    def truncate_metrics(self, last_round: int) -> None:
        """Drop metrics of rounds after ``last_round`` (they belong to a round that was lost),
        and lines that cannot be read (cut short by a kill, or damaged); then make every
        committed round's ``round_committed`` record agree with the round's own files (one per
        round, rebuilt from ``eval.json`` and ``train_metrics.json`` when it is missing, as after
        a kill between the commit and the log, or disagrees)."""
        if not os.path.lexists(self.metrics_path):
            return
        kept = [r.value for r in self.metrics_records()
                if isinstance(r.value, dict) and _round_of(r.value) <= last_round]
        committed = [i for i in self.completed_rounds() if i <= last_round]
        expected = {}
        for index in committed:
            try:
                expected[index] = self.committed_record(index)
            except (ConfigError, TypeError, ValueError, KeyError):
                continue  # unreadable records: the resume's plan has already said so
        if any(self.metrics_problem(kept, i, expected[i]) for i in expected):
            rebuilt, seen = [], set()
            for value in kept:
                index = value.get("round")
                if value.get("event") == "round_committed" and index in expected:
                    if index not in seen:
                        rebuilt.append(expected[index])
                        seen.add(index)
                    continue
                rebuilt.append(value)
            for index in sorted(set(expected) - seen):
                at = next((k + 1 for k, v in reversed(list(enumerate(rebuilt)))
                           if _round_of(v) <= index), 0)
                rebuilt.insert(at, expected[index])
            kept = rebuilt
        atomic_write(self.metrics_path, "".join(json.dumps(v) + "\n" for v in kept))

    def committed_record(self, index: int) -> dict[str, Any]:
        """The ``round_committed`` metrics record a committed round's files imply."""
        directory = self.round_dir(index)
        train = read_json(directory / "train_metrics.json")
        score = read_json(directory / "eval.json")["score"]
        return {"round": index, "event": "round_committed", "score": score,
                **(train if isinstance(train, dict) else {})}

    @staticmethod
    def metrics_problem(values: list[Any], index: int, expected: dict[str, Any]) -> str | None:
        """Why ``metrics.jsonl`` disagrees with committed round ``index``, or ``None``."""
        found = [v for v in values if isinstance(v, dict) and v.get("round") == index
                 and v.get("event") == "round_committed"]
        if not found:
            return f"no round_committed record for round {index}"
        if len(found) > 1:
            return f"{len(found)} round_committed records for round {index}"
        score = found[0].get("score")
        if score != expected["score"]:
            return (f"round {index}: score {score!r} in metrics.jsonl, "
                    f"{expected['score']!r} in rounds/round_{index:03d}/eval.json")
        return None

    def metrics_records(self) -> list[Record]:
        """Every non-blank line of ``metrics.jsonl`` as a ``Record`` (value or error); a
        ``metrics.jsonl`` that is a link or a device is not read (one error record: a resume
        replaces it with the committed rounds' records)."""
        if not os.path.lexists(self.metrics_path):
            return []
        if not is_plain_file(self.metrics_path):
            return [Record(1, error="metrics.jsonl is not a plain file (a link or a device); not read")]
        return list(jsonl_records(self.metrics_path))


def creation_problem(path: Path, output_dir: Path, exc: OSError) -> str:
    """One line naming why the run directory ``path`` could not be made, and the fix."""
    import errno

    if exc.errno == errno.ENAMETOOLONG:
        return (f"cannot create the run directory {str(path)[:80]}…: a name in that path is too "
                "long for the file system (at most 255 bytes each); choose a shorter --run-name "
                "or --output-dir")
    if exc.errno in (errno.ENOTDIR, errno.EEXIST) or (output_dir.exists() and not output_dir.is_dir()):
        return (f"--output-dir {output_dir}: {exc.filename or output_dir} is not a directory; "
                "pass a directory (it is created when missing)")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"no space left for the run directory {path} ({exc.strerror}): free space on that "
                "device or pass another --output-dir")
    return (f"cannot create the run directory {path} ({exc.strerror or exc}): pass an "
            "--output-dir you can write to")


def _round_of(record: dict[str, Any]) -> float:
    value = record.get("round", -1)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else float("inf")


@dataclass
class ResumePlan:
    """What ``RunDir.plan_resume`` decided."""

    last: int | None
    """The round to resume after (``None``: start from scratch, or refused)."""
    dropped: list[int]
    """Committed rounds after ``last`` that are damaged or depend on damaged ones."""
    health: dict[int, RoundHealth]
    """Every round that was checked."""
    refused: bool = False
    """Nothing intact remains to resume from."""
    gap: int | None = None
    """The first missing round number when committed rounds are not contiguous from 0 (the
    rounds after it are dropped: each round continues from the one before it)."""

    def gap_note(self) -> str:
        """What the gap means, or "" without one."""
        if self.gap is None:
            return ""
        later = [i for i in self.dropped if i > self.gap]
        return (f"round {self.gap} is missing (rounds/round_{self.gap:03d}), so round(s) "
                f"{', '.join(map(str, later))} after it cannot be continued from")

    def explain(self, path: Path) -> str:
        lines = [self.gap_note()] if self.gap is not None else []
        for index in sorted(self.health):
            h = self.health[index]
            if self.last is not None and index < self.last:
                continue  # kept rounds (their damage, if any, is in the resume's own notes)
            if h.damaged or (index in self.dropped and h.pruned):
                lines.append(f"round {index}: {h.describe()}")
        if self.refused:
            pruned = [i for i, h in self.health.items() if h.pruned and not h.damaged]
            why = ("the older rounds no longer hold their weights (pruned by checkpoint "
                   "retention), so it cannot fall back further" if pruned
                   else "no intact round remains")
            return (f"cannot resume {path}: " + "; ".join(lines) + f"; {why}. Restore the "
                    f"files, or start a new run (`curriculum doctor {path}` shows every round).")
        dropped = ", ".join(str(i) for i in self.dropped)
        after = "from the start" if self.last is None else f"after round {self.last}"
        return ("; ".join(lines) + f". Resuming {after}: round(s) {dropped} "
                f"moved aside to {path / 'rounds'}/.round_NNN.damaged and will run again.")


def _write_design(directory: Path, report: RoundReport) -> None:
    if report.design is None:
        return
    write_json(directory / "design.json", report.design.model_dump(mode="json"))
    if report.design.design.prompt is not None:
        atomic_write(directory / "engineer_prompt.txt", report.design.design.prompt)
    if report.design.design.output is not None:
        atomic_write(directory / "engineer_output.txt", report.design.design.output)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # a file system without hard links
        shutil.copy2(src, dst)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
