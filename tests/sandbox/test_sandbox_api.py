"""The sandbox API: loading, validation of answers, structured failures, config, layers."""

from __future__ import annotations

import gc
import os
import signal
import threading
import time

import pytest
from pydantic import ValidationError

from testbeds.spade.sandbox import SandboxConfig, SandboxFailure, SandboxPool, doctor

from sandbox_helpers import alive, settled_pids

GOOD = '''
import random

class Helper:
    pass

class CoinEnv:
    def reset(self, seed=None):
        self.rng = random.Random(seed)
        print("reset called")
        return "flip", {"seed": seed}

    def step(self, action):
        print("\\x00\\x00\\x00\\x10 fake frame header")
        side = self.rng.choice(["heads", "tails"])
        return side, float(action == side), True, False, {"side": side}

    def solution(self):
        return {"answer": "heads"}

    def add(self, a, b):
        return a + b
'''


def failure_of(call) -> object:
    with pytest.raises(SandboxFailure) as info:
        call()
    return info.value.failure


def env_returning(reset_value: str = '"obs", {}', step_value: str = '"obs", 1.0, False, False, {}') -> str:
    return f'''
def nest(depth):
    value = []
    for _ in range(depth - 1):
        value = [value]
    return value

class ValueEnv:
    def reset(self, seed=None):
        return {reset_value}

    def step(self, action):
        return {step_value}
'''


def test_reset_step_call_round_trip(pool):
    with pool.load(GOOD) as env:
        assert env.class_name == "CoinEnv"
        first = env.reset(seed=7)
        assert (first.obs, first.info, first.output) == ("flip", {"seed": 7}, "reset called\n")
        step = env.step("heads")
        assert step.obs in ("heads", "tails")
        assert step.reward == float(step.obs == "heads")
        assert step.terminated is True and step.truncated is False
        assert "fake frame header" in step.output
        assert env.call("solution") == {"answer": "heads"}
        assert env.call("add", 2, 3) == 5
        again = env.reset(seed=7)
        assert again.obs == "flip"


def test_same_seed_same_episode(pool):
    observations = []
    for _ in range(2):
        with pool.load(GOOD) as env:
            env.reset(seed=3)
            observations.append([env.step("heads").obs for _ in range(1)])
    assert observations[0] == observations[1]


def test_class_selection(pool):
    two = GOOD + "\nclass OtherEnv(CoinEnv):\n    pass\n"
    assert failure_of(lambda: pool.load(two)).kind == "bad_program"
    with pool.load(two, class_name="OtherEnv") as env:
        assert env.class_name == "OtherEnv"
    assert failure_of(lambda: pool.load("class Nothing:\n    pass\n")).kind == "bad_program"
    assert failure_of(lambda: pool.load(GOOD, class_name="Missing")).kind == "bad_program"


def test_syntax_error_reports_line(pool):
    failure = failure_of(lambda: pool.load("x = 1\n\ndef broken(:\n    pass\n"))
    assert failure.kind == "syntax_error"
    assert failure.line == 3


def test_exception_has_traceback_and_instance_survives(pool):
    source = '''
class FlakyEnv:
    def reset(self, seed=None):
        return "o", {}

    def step(self, action):
        if action == "bad":
            raise ValueError("no such move")
        return "o", 0.0, False, False, {}
'''
    with pool.load(source) as env:
        env.reset()
        failure = failure_of(lambda: env.step("bad"))
        assert failure.kind == "exception"
        assert "ValueError: no such move" in failure.detail
        assert "line 8" in failure.traceback
        assert env.step("good").obs == "o"


def test_constructor_exception(pool):
    failure = failure_of(lambda: pool.load("class BadEnv:\n    def __init__(self):\n        1 / 0\n"))
    assert failure.kind == "exception" and "ZeroDivisionError" in failure.detail


@pytest.mark.parametrize("reset_value, step_value, message", [
    ('"obs", {}, 3', None, "reset must return (obs, info)"),
    ("42, {}", None, "obs must be a str"),
    ('"obs", []', None, "info must be a dict"),
    ('"x" * 70000, {}', None, "exceeds"),
    ('"x" * (2 << 20), {}', None, "exceeds the"),
    ('"obs", {"s": {1, 2}}', None, "not JSON-serialisable"),
    (None, '"just a string"', "step must return a 5-tuple"),
    (None, '"o", float("nan"), False, False, {}', "Out of range float values"),
    (None, '"o", float("inf"), False, False, {}', "Out of range float values"),
    (None, '"o", 10**400, False, False, {}', "reward must be finite and fit a float"),
    (None, '"o", -10**400, False, False, {}', "reward must be finite and fit a float"),
    (None, '"o", 1.0, False, False, {"x": 10**700}', "integer of 701 digits exceeds max_reply_int_digits (640)"),
    (None, '"o", 1.0, False, False, {"x": 10**5000}', "not JSON-serialisable"),
    ('"obs", {"x": "\\ud800"}', None, "lone surrogate"),
    ('"\\udfff", {}', None, "lone surrogate"),
    ('"obs", {"x": nest(900)}', None, "nested deeper than 32"),
    ('"obs", {"x": nest(30)}', None, "nested deeper than 32"),
    (None, '"o", "1.0", False, False, {}', "reward must be a number"),
    (None, '"o", True, False, False, {}', "reward must be a number"),
    (None, '"o", 1.0, 1, False, {}', "must be bools"),
    (None, '"o", 1.0, False, None, {}', "must be bools"),
    (None, '"o", 1.0, False, False, None', "info must be a dict"),
])
def test_bad_returns(pool, reset_value, step_value, message, clean_after):
    clean_after.append(pool)
    source = env_returning(*(v for v in (reset_value, step_value) if v is not None)) if step_value is None \
        else env_returning(step_value=step_value)
    with pool.load(source) as env:
        if step_value is None:
            failure = failure_of(lambda: env.reset())
        else:
            env.reset()
            failure = failure_of(lambda: env.step("a"))
    assert failure.kind == "bad_return"
    assert message in failure.detail


def test_nesting_up_to_the_limit_is_accepted(pool):
    """An info value 29 lists deep sits at depth 32 of the reply (envelope, pair, info): the most
    ``max_reply_depth`` allows."""
    with pool.load(env_returning('"obs", {"x": nest(29)}')) as env:
        assert str(env.reset().info["x"]).count("[") == 29


def test_integer_reward_is_accepted(pool):
    with pool.load(env_returning(step_value='"o", 1, False, False, {}')) as env:
        env.reset()
        assert env.step("a").reward == 1.0


def test_private_and_missing_methods(pool):
    with pool.load(GOOD) as env:
        assert failure_of(lambda: env.call("_secret")).kind == "bad_call"
        assert failure_of(lambda: env.call("no_such_method")).kind == "exception"
        assert env.call("solution") == {"answer": "heads"}


def test_load_deadline(pool):
    failure = failure_of(lambda: pool.load("while True:\n    pass\n"))
    assert failure.kind == "timeout"


def test_closed_handle_refuses_calls(pool):
    env = pool.load(GOOD)
    env.close()
    assert failure_of(lambda: env.reset()).kind == "closed"


def test_timeout_closes_the_instance(pool):
    source = env_returning(step_value='sum(1 for _ in iter(int, 1))')
    with pool.load(source) as env:
        env.reset()
        assert failure_of(lambda: env.step("a")).kind == "timeout"
        assert failure_of(lambda: env.step("a")).kind == "closed"


def test_concurrent_instances_from_threads(pool):
    results, errors = [], []

    def episode(seed: int) -> None:
        try:
            for _ in range(10):
                with pool.load(GOOD, timeout=30) as env:
                    env.reset(seed)
                    results.append(env.step("heads").obs)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(results) == 40


def test_dropped_handles_give_their_workers_back(pool):
    for _ in range(2):
        handles = [pool.load(GOOD, timeout=10) for _ in pool.workers]  # every worker taken
        assert handles[0].reset(1).obs == "flip"
        del handles  # never closed: the finaliser closes them
        gc.collect()


def test_prelude_base_class_is_visible():
    prelude = '''
class ToolEnv:
    tools = ()
    def reset(self, seed=None):
        return "tools: " + ", ".join(self.tools), {}
'''
    source = "class CalcEnv(ToolEnv):\n    tools = ('add', 'mul')\n    def step(self, a):\n" \
             "        return 'o', 0.0, True, False, {}\n"
    with SandboxPool(SandboxConfig(workers=1, prelude_source=prelude)) as pool:
        with pool.load(source) as env:
            assert env.class_name == "CalcEnv"
            assert env.reset().obs == "tools: add, mul"


def test_supervisor_kills_a_stopped_worker(bare_pool):
    """A worker that never answers (its zygote stopped) is killed by the host after the grace,
    and the pool restarts it for the next environment. (The instance itself cannot stop the
    zygote, pid 1 of the sandbox, even without seccomp: the host does it here.)"""
    source = '''
import os, signal
class StopEnv:
    def reset(self, seed=None):
        os.kill(1, signal.SIGSTOP)  # dropped by the kernel: pid 1 of its namespace
        return "o", {}
'''
    env = bare_pool.load(source)
    assert env.reset().obs == "o"  # the instance talks to the host directly
    processes = env.worker.sandbox_pids()
    with open(f"/proc/{processes[0]}/cmdline", "rb") as handle:
        assert b"_worker.py" in handle.read()  # the zygote is bwrap's only child
    os.kill(processes[0], signal.SIGSTOP)
    started = time.monotonic()
    outcome = env.close()  # the zygote is stopped: the close request goes unanswered
    assert "worker killed" in outcome["detail"]
    config = bare_pool.config
    assert time.monotonic() - started < config.call_deadline_s + config.supervisor_grace_s + 3
    assert not env.worker.alive
    deadline = time.monotonic() + 2  # SIGKILLed processes still need to be scheduled to die
    while any(alive(pid) for pid in processes) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [pid for pid in processes if alive(pid)]
    with bare_pool.load(GOOD) as env:
        assert env.reset(1).obs == "flip"


def test_config_forbids_unknown_fields():
    with pytest.raises(ValidationError):
        SandboxConfig(deadline=3)
    with pytest.raises(ValidationError):
        SandboxConfig(memory_mb=1)


def test_missing_layer_refuses_unless_degraded_allowed():
    # without a user namespace RLIMIT_NPROC counts every process of the sandbox uid on the host,
    # including the other test pools' workers
    config = SandboxConfig(workers=1, bwrap_path="/nonexistent/bwrap", max_processes=256)
    failure = failure_of(lambda: SandboxPool(config).start())
    assert failure.kind == "sandbox_unavailable" and "bubblewrap" in failure.detail
    with SandboxPool(config.model_copy(update={"allow_degraded": True})) as pool:
        assert pool.report.missing == ["bubblewrap"]
        with pool.load(GOOD) as env:
            assert env.reset(0).obs == "flip"
        assert len(settled_pids(pool.workers[0], 1)) == 1  # no bwrap: just the zygote's spare


def test_unusable_bwrap_is_reported_as_missing():
    """A bwrap that cannot create namespaces (as in containers without user namespaces)."""
    failure = failure_of(lambda: SandboxPool(SandboxConfig(workers=1, bwrap_path="/usr/bin/false")).start())
    assert failure.kind == "sandbox_unavailable"
    assert "bubblewrap: /usr/bin/false cannot create namespaces" in failure.detail


@pytest.mark.skipif(os.geteuid() != 0, reason="planting a directory for another uid needs root")
def test_planted_runtime_directory_is_refused(tmp_path):
    planted = tmp_path / "runtime"
    planted.mkdir()
    os.chown(planted, 12345, 12345)
    config = SandboxConfig(workers=1, runtime_dir=str(planted))
    failure = failure_of(lambda: SandboxPool(config).start())
    assert failure.kind == "sandbox_unavailable" and "owned by uid 12345" in failure.detail


def test_doctor_reports_every_layer_active():
    report = doctor()
    assert [layer.name for layer in report.layers] == [
        "supervisor", "uid", "bubblewrap", "minimal_env", "rlimits", "seccomp", "import_allowlist"]
    assert report.ok, report.missing
    assert report.worker["uid"] == 65534 and report.worker["no_new_privs"] is True
