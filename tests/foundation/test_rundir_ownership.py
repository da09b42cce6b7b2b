"""Who may write a run dir: the lock comes first, ownership is decided under it, links are refused.

* A fresh run takes the run dir's lock before it writes anything: a second start with the same
  name is refused and writes nothing.
* ``compare``'s workers decide whether a run is new under that lock: a live run of another
  ``compare`` on the same ``--out`` is never deleted, and a run finished meanwhile is resumed
  (a no-op), not started over.
* ``.lock`` is opened without following a link: a ``.lock`` that is a symbolic link is refused
  and its target is left as it was.

Runs use the simulated learner (seconds per run) with the real MAPF testbed.
"""

from __future__ import annotations

import fcntl
import os

import pytest

from curriculum import compare
from curriculum.config import ConfigError
from curriculum.loop import run
from curriculum.rundir import RunDir
from test_rundir_integrity import _config, finished  # noqa: F401
from test_loop import tree_digest


def _hold_lock(directory):
    """Lock ``directory`` as a run in another process would (another open file description)."""
    directory.mkdir(parents=True, exist_ok=True)
    handle = open(directory / ".lock", "a+")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return handle


def test_a_fresh_run_locks_before_it_writes(tmp_path):
    config = _config(tmp_path / "runs", rounds=1)
    holder = _hold_lock(tmp_path / "runs" / "run")
    try:
        with pytest.raises(ConfigError, match="in use by another run"):
            RunDir.create(config)
    finally:
        holder.close()
    assert sorted(os.listdir(tmp_path / "runs" / "run")) == [".lock"]


def test_a_fresh_run_holds_its_lock_from_creation(tmp_path):
    created = RunDir.create(_config(tmp_path / "runs", rounds=1))
    try:
        with pytest.raises(ConfigError, match="in use by another run"):
            RunDir.open(created.path).lock()
    finally:
        created.unlock()


def test_compare_never_deletes_a_run_another_compare_is_writing(tmp_path):
    config = _config(tmp_path / "runs", rounds=1)
    live = tmp_path / "runs" / "run"
    holder = _hold_lock(live)
    (live / "rounds" / ".round_000.partial").mkdir(parents=True)
    (live / "rounds" / ".round_000.partial" / "eval.json").write_text("{}")
    try:
        with pytest.raises(ConfigError, match="in use by another run"):
            compare._run_one(config.model_dump(mode="json"), "new")
    finally:
        holder.close()
    assert (live / "rounds" / ".round_000.partial" / "eval.json").read_text() == "{}"


def test_compare_resumes_a_run_that_became_complete_after_it_was_judged_new(tmp_path, monkeypatch):
    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path / "cache"))
    config = _config(tmp_path / "runs", rounds=1)
    done = run(config).run_dir
    before, inode = tree_digest(done / "rounds"), os.stat(done / "rounds" / "round_000").st_ino
    compare._run_one(config.model_dump(mode="json"), "new")  # judged "new" before it existed
    assert tree_digest(done / "rounds") == before
    assert os.stat(done / "rounds" / "round_000").st_ino == inode  # kept, not run again


def test_compare_clears_the_leftovers_of_a_start_that_never_wrote_its_config(tmp_path, monkeypatch):
    monkeypatch.setenv("CURRICULUM_CACHE", str(tmp_path / "cache"))
    config = _config(tmp_path / "runs", rounds=1)
    left = tmp_path / "runs" / "run" / "rounds" / ".round_000.partial"
    left.mkdir(parents=True)
    compare._run_one(config.model_dump(mode="json"), "new")
    assert not left.exists()
    assert RunDir.open(tmp_path / "runs" / "run").completed_rounds() == [0]


def test_a_lock_that_is_a_link_is_refused_and_its_target_kept(finished, tmp_path):
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    lock = finished.path / ".lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(outside)
    config = finished.saved_config().model_copy(update={"rounds": 4})
    with pytest.raises(ConfigError, match="symbolic link"):
        run(config, resume=finished.path)
    assert outside.read_text() == "keep me"
    with pytest.raises(ConfigError, match="symbolic link"):
        RunDir.create(finished.saved_config(), claim=True)
    assert outside.read_text() == "keep me"
