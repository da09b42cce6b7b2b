"""A run dir is read as what it is, never as what its files point at.

* Paths a round's ``manifest.json`` lists must stay inside the round dir: ``../`` and absolute
  entries (``/proc/self/pagemap`` would hang a reader) are damage, and are never opened.
* A record, the saved config or the manifest that is a link (to ``/dev/zero``, or anywhere) is
  damage named in one line by ``doctor``, never read; a resume refuses it the same way.
* A round directory that is a link is no round: ``doctor`` names it and an extension moves it
  aside instead of crashing.

Runs use the simulated learner (seconds per run) with the real MAPF testbed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil

from curriculum.doctor import diagnose
from curriculum.rundir import RunDir
from test_loop import tree_digest
from test_rundir_hostile import _invoke
from test_rundir_integrity import _config, finished  # noqa: F401


def _add_to_manifest(round_dir, rel: str, data: bytes) -> None:
    path = round_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    path.write_text(json.dumps(manifest))


def _finding(report, subject: str):
    return next(f for f in report.findings if f.subject == subject)


def test_manifest_paths_outside_the_round_are_damage_and_never_read(finished, tmp_path):
    host = tmp_path / "host_file.txt"
    host.write_bytes(b"a host file")
    round_dir = finished.round_dir(1)
    climb = os.path.relpath(host, round_dir)
    _add_to_manifest(round_dir, climb, host.read_bytes())
    _add_to_manifest(round_dir, "/proc/self/pagemap", b"")
    report = diagnose(finished.path)
    finding = _finding(report, "round 1")
    assert not finding.ok
    assert climb in finding.detail and "/proc/self/pagemap" in finding.detail
    assert "not a path inside the round dir" in finding.detail


def test_a_record_linked_to_dev_zero_is_named_by_doctor_and_refused_by_resume(finished):
    record = finished.round_dir(2) / "eval.json"
    record.unlink()
    record.symlink_to("/dev/zero")
    res, text = _invoke("doctor", str(finished.path))
    assert res.exit_code != 0
    assert "eval.json" in text and "symbolic link" in text
    res, text = _invoke("run", "--resume", str(finished.path))
    assert "Traceback" not in text and "MemoryError" not in text


def test_a_saved_config_that_is_a_device_is_refused_in_one_line(finished):
    config = finished.path / "config.yaml"
    config.unlink()
    config.symlink_to("/dev/zero")
    report = diagnose(finished.path)
    assert not report.findings[0].ok and "symbolic link" in report.findings[0].detail
    res, text = _invoke("run", "--resume", str(finished.path))
    assert res.exit_code == 2 and "config.yaml" in text


def test_a_record_replaced_by_a_device_is_not_read(finished):
    record = finished.round_dir(0) / "proposal.json"
    record.unlink()
    os.mkfifo(record)  # a pipe nobody writes: a plain read would block forever
    health = finished.check_round(0)
    assert "proposal.json" in health.damaged and "pipe" in health.damaged["proposal.json"]


def test_a_linked_round_dir_is_no_round_and_an_extension_sets_it_aside(finished, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(finished.round_dir(2), elsewhere)
    before = tree_digest(elsewhere)
    shutil.rmtree(finished.round_dir(2))
    finished.round_dir(2).symlink_to(elsewhere, target_is_directory=True)
    assert finished.completed_rounds() == [0, 1]
    report = diagnose(finished.path)
    assert not _finding(report, "rounds/round_002").ok
    res, text = _invoke("run", "--resume", str(finished.path), "--rounds", "4")
    assert res.exit_code == 0, text
    run = RunDir.open(finished.path)
    assert run.completed_rounds() == [0, 1, 2, 3]
    assert not run.round_dir(2).is_symlink()
    assert tree_digest(elsewhere) == before  # what the link pointed at is untouched


def test_a_metrics_stream_that_is_a_link_is_neither_read_nor_written_through(finished, tmp_path):
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"keep": true}\n')
    metrics = finished.metrics_path
    metrics.unlink()
    metrics.symlink_to(outside)
    finding = _finding(diagnose(finished.path), "metrics.jsonl")
    assert not finding.ok
    res, text = _invoke("run", "--resume", str(finished.path), "--rounds", "4")
    assert res.exit_code == 0, text
    assert outside.read_text() == '{"keep": true}\n'
    assert not metrics.is_symlink() and "round_committed" in metrics.read_text()
