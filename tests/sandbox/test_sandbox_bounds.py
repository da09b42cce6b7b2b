"""What the sandbox bounds besides bytes and time: scratch entries, deep trees, descriptors.

* An instance that fills /tmp with empty files is killed at ``max_scratch_files`` (a tmpfs
  bounds bytes, not inodes) and the worker keeps serving with an empty /tmp.
* A tree nested deeper than the recursion limit and ``PATH_MAX`` is still cleared between
  instances, without restarting the worker.
* A host holding more than 1,024 descriptors still talks to its workers (no ``select``).
* No instance can make itself a descriptor's signal owner (``F_SETOWN`` / ``F_SETSIG``), the
  way to signal the zygote without ``kill``.
"""

from __future__ import annotations

import time

import os
import resource

import pytest

from testbeds.spade.sandbox import SandboxConfig, SandboxFailure, SandboxPool, _worker

from conftest import BENIGN, FAST, PROBE_WRAPPER

WRAPPER = PROBE_WRAPPER.replace("{body}", "import os\n{body}", 1)  # the probes list and count files

LIST_TMP = "def run():\n    return sorted(os.listdir('/tmp'))"


@pytest.fixture(scope="module")
def small_scratch():
    pool = SandboxPool(SandboxConfig(**(FAST | dict(workers=1, enforce_import_allowlist=False,
                                                    allow_degraded=True, max_scratch_files=300))))
    pool.start()
    yield pool
    pool.close()


def _serves_with_empty_tmp(pool: SandboxPool) -> None:
    with pool.load(WRAPPER.format(body=LIST_TMP)) as env:
        assert env.reset(0).obs == "[]"
    with pool.load(BENIGN) as env:
        env.reset(1)
        assert env.step("x").obs == "echo x"


def test_empty_files_past_the_limit_kill_the_instance(small_scratch):
    flood = ("def run():\n    for i in range(200_000):\n"
             "        open(f'/tmp/f{i}', 'w').close()\n    return 'all made'")
    with pytest.raises(SandboxFailure) as info:
        with small_scratch.load(WRAPPER.format(body=flood)) as env:
            env.reset(0)
    assert info.value.failure.kind == "memory_limit"
    assert "max_scratch_files (300)" in info.value.failure.detail
    _serves_with_empty_tmp(small_scratch)


def test_directories_count_too_and_daemons_die_with_the_instance(small_scratch):
    flood = ("def run():\n    if os.fork() == 0:\n        for i in range(200_000):\n"
             "            os.mkdir(f'/tmp/d{i}')\n        os._exit(0)\n    return 'forked'")
    with pytest.raises(SandboxFailure) as info:
        with small_scratch.load(WRAPPER.format(body=flood)) as env:
            assert env.reset(0).obs == "forked"
            # The child floods after the reply and a later call sees it; on a loaded machine the
            # child may get little CPU, so call until it has (bounded: a daemon the limit missed fails).
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                env.step("x")
                time.sleep(0.01)
    assert info.value.failure.kind == "memory_limit"
    _serves_with_empty_tmp(small_scratch)


def test_deeply_nested_scratch_is_cleared_without_a_restart():
    nest = ("def run():\n    for _ in range(3000):\n        os.mkdir('d')\n        os.chdir('d')\n"
            "    os.chmod('.', 0)\n    return 'nested'")
    with SandboxPool(SandboxConfig(**(FAST | dict(workers=1, enforce_import_allowlist=False,
                                                  allow_degraded=True)))) as pool:
        with pool.load(WRAPPER.format(body=nest)) as env:
            assert env.reset(0).obs == "nested"
        _serves_with_empty_tmp(pool)
        assert pool.workers[0].restarts == 0 and pool.workers[0].alive


def test_clear_scratch_is_iterative(tmp_path):
    """On the host: 3,000 levels (past the recursion limit and PATH_MAX), some locked."""
    here = os.getcwd()
    try:
        os.chdir(tmp_path)
        for level in range(3000):
            os.mkdir("d")
            os.chdir("d")
            if level % 500 == 0:
                with open("note", "w") as handle:
                    handle.write("x")
                os.symlink("/etc/passwd", "link")
        os.chmod(".", 0)
        _worker.clear_scratch(str(tmp_path))
        assert os.getcwd() == str(tmp_path)
    finally:
        os.chdir(here)
    assert os.listdir(tmp_path) == []
    assert os.path.exists("/etc/passwd")


def test_a_host_with_many_descriptors_still_runs_programs():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1400:
        pytest.skip(f"descriptor hard limit {hard} is below 1,400")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1400) if soft != resource.RLIM_INFINITY
                                                 else soft, hard))
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        with SandboxPool(SandboxConfig(**(FAST | dict(workers=1)))) as pool:
            with pool.load(BENIGN) as env:
                assert env.channel > 1023
                assert env.reset(1).obs == "ready"
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_signal_ownership_of_a_descriptor_is_refused(raw_pool):
    probe = '''
import fcntl
def run():
    r, w = os.pipe()
    results = []
    for command in (8, 10, 15):  # F_SETOWN, F_SETSIG, F_SETOWN_EX
        try:
            fcntl.fcntl(r, command, 1)
            results.append("allowed")
        except PermissionError:
            results.append("refused")
        except OSError as exc:
            results.append(exc.errno)
    return results'''
    with raw_pool.load(WRAPPER.format(body=probe)) as env:
        assert env.reset(0).obs == "['refused', 'refused', 'refused']"


def test_a_runtime_dir_swapped_after_the_check_is_not_used():
    """The runtime is held by descriptor: a restarted worker still runs the checked
    ``_worker.py`` after the directory's path was swapped for a link to another one."""
    import shutil
    import tempfile
    from pathlib import Path

    base = Path(tempfile.mkdtemp(prefix="curriculum-runtime-test-", dir="/var/tmp"))
    try:
        os.chmod(base, 0o755)
        config = SandboxConfig(**(FAST | dict(workers=1, runtime_dir=str(base / "runtime"))))
        with SandboxPool(config) as pool:
            worker_dir = next((base / "runtime").glob("worker-*"))
            planted = base / "planted"
            planted.mkdir(mode=0o755)
            (planted / "_worker.py").write_text("import sys\nsys.exit(3)\n")
            os.chmod(planted / "_worker.py", 0o644)
            worker_dir.rename(base / "runtime" / "moved-away")
            worker_dir.symlink_to(planted, target_is_directory=True)
            pool.workers[0].kill()  # the next load restarts the worker
            with pool.load(BENIGN) as env:
                assert env.reset(1).obs == "ready"
            assert pool.workers[0].restarts == 1
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_no_host_descriptor_reaches_an_instance(raw_pool):
    probe = ("def run():\n    found = []\n    for fd in os.listdir('/proc/self/fd'):\n"
             "        try:\n            found.append(os.readlink(f'/proc/self/fd/{fd}'))\n"
             "        except OSError:\n            pass\n    return found")
    with raw_pool.load(WRAPPER.format(body=probe)) as env:
        links = env.reset(0).obs
    assert "curriculum-sandbox" not in links and "runtime" not in links, links
