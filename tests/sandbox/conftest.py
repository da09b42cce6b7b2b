"""Fixtures for the sandbox tests: pools with and without the in-process layers, a host canary.

Three pools, each started once per session:

* ``pool`` — every layer on, as in production.
* ``raw_pool`` — test-only: the import allowlist is off, so attacks reach the OS layers
  (seccomp, rlimits, bubblewrap, uid).
* ``bare_pool`` — test-only: allowlist *and* seccomp off, to prove bubblewrap, uid and rlimits
  on their own.

A secret is put in the test process's environment before any pool starts, so the tests can
check that nothing in the sandbox can read it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

SECRET = "sandbox-test-secret-7f3a9c"
os.environ["CURRICULUM_SANDBOX_TEST_SECRET"] = SECRET

from sandbox_helpers import settled_pids  # noqa: E402

from testbeds.spade.sandbox import SandboxConfig, SandboxPool  # noqa: E402

PROBE_WRAPPER = '''
{body}

class ProbeEnv:
    def reset(self, seed=None):
        return str(run()), {{}}

    def step(self, action):
        return "", 0.0, True, False, {{}}
'''
"""An environment whose ``reset`` returns ``str(run())``: ``body`` defines ``run``, the probe."""

BENIGN = '''
class EchoEnv:
    def reset(self, seed=None):
        self.t = 0
        return "ready", {"seed": seed}

    def step(self, action):
        self.t += 1
        return f"echo {action}", 0.5, self.t >= 3, False, {"t": self.t}
'''

IDLE_PROCESSES = 2
"""The zygote (pid 1 of the sandbox: bwrap runs with ``--as-pid-1``) and its pre-forked spare
instance."""

FAST = dict(workers=2, call_deadline_s=2.0, load_deadline_s=2.0, supervisor_grace_s=1.0,
            memory_mb=256)


def _pool(**overrides) -> SandboxPool:
    pool = SandboxPool(SandboxConfig(**(FAST | overrides)))
    pool.start()
    return pool


@pytest.fixture(scope="session")
def secret() -> str:
    """The secret placed in the host environment before any pool started."""
    return SECRET


@pytest.fixture(scope="session")
def pool():
    pool = _pool()
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def raw_pool():
    pool = _pool(enforce_import_allowlist=False, allow_degraded=True)
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def bare_pool():
    pool = _pool(enforce_import_allowlist=False, seccomp=False, allow_degraded=True)
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def canary() -> Path:
    """A host file in a world-writable directory: only the mount namespace keeps it safe."""
    directory = Path(f"/tmp/sandbox-canary-{os.getpid()}")
    directory.mkdir(exist_ok=True)
    os.chmod(directory, 0o777)
    path = directory / "canary.txt"
    path.write_text("alive")
    os.chmod(path, 0o666)
    yield path
    path.unlink(missing_ok=True)
    directory.rmdir()


def assert_clean_and_serving(pool: SandboxPool) -> None:
    """No process is left in any worker beyond the zygote and its idle pre-forked spare, and the pool still runs a benign environment end to end."""
    for worker in pool.workers:
        if worker.alive:
            assert len(settled_pids(worker, IDLE_PROCESSES)) == IDLE_PROCESSES
    handles = [pool.load(BENIGN, timeout=10) for _ in pool.workers]  # one per worker
    for env in handles:
        assert env.reset(1).obs == "ready"
        assert env.step("x").obs == "echo x"
        env.close()
    for worker in pool.workers:
        assert worker.alive
        assert len(settled_pids(worker, IDLE_PROCESSES)) == IDLE_PROCESSES


@pytest.fixture
def clean_after(canary):
    """Yield, then check the canary and that every pool used is clean and serving."""
    used: list[SandboxPool] = []
    yield used
    assert canary.read_text() == "alive"
    assert stat.S_IMODE(canary.stat().st_mode) == 0o666
    for pool in used:
        assert_clean_and_serving(pool)
