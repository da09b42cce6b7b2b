"""Attack programs against the sandbox, each with its expected outcome.

Every attack runs inside ``reset`` of a small environment. After each one the host canary is
intact, no sandbox process is left and the same pool still serves a benign environment
(``clean_after``). Attacks that the import allowlist would stop early run in ``raw_pool``
(allowlist off) or ``bare_pool`` (allowlist and seccomp off) so the OS layers are proven.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from testbeds.spade.sandbox import SandboxFailure

from sandbox_helpers import alive, settled_pids

WRAPPER = '''
{body}

class AttackEnv:
    def reset(self, seed=None):
        return str(run()), {{}}

    def step(self, action):
        return "", 0.0, True, False, {{}}
'''


@dataclass
class Attack:
    name: str
    pool: str
    body: str
    expect_kind: str | None = None
    check: Callable[[str, str], bool] | None = None
    """Predicate on (reset observation, host secret) when the call is expected to succeed."""


def first_int(obs: str, index: int = 0) -> int:
    """The ``index``-th element of an observation like ``[12, 'EMFILE']`` as an int."""
    return int(obs.strip("[]").split(",")[index])


PROC_MEM_WRITE = '''
import os
def run():
    out = []
    for entry in sorted(os.listdir("/proc")):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:  # a mapped address: the start of the heap or of the first mapping
            rows = open(f"/proc/{{entry}}/maps").read().splitlines()
            row = next((r for r in rows if "[heap]" in r), rows[0])
            address = int(row.split("-")[0], 16)
        except (OSError, IndexError):
            address = 0x400000
        for path in (f"/proc/{{entry}}/mem", f"/proc/{{entry}}/task/{{entry}}/mem"):
            try:
                with open(path, "r+b", buffering=0) as handle:
                    handle.seek(address)
                    handle.write(b"A" * 64)
                out.append("OK " + path)
            except OSError as exc:
                out.append("ERR " + type(exc).__name__)
    return out or ["nothing else visible"]'''

IPC_CREATE = '''
import ctypes
def run():
    libc = ctypes.CDLL(None, use_errno=True)
    return [libc.msgget(0x5EC2E7, 0o1666), libc.shmget(0x5EC2E7, 4096, 0o1666),
            libc.semget(0x5EC2E7, 1, 0o1666), libc.mq_open(b"/secret", 0o102, 0o666, None)]'''

ATTACKS = [
    Attack("infinite_loop", "pool", "def run():\n    while True:\n        pass", "timeout"),
    Attack("sleep_forever", "raw_pool", "import time\ndef run():\n    time.sleep(10**6)", "timeout"),
    Attack("ignore_signals_swallow_baseexception", "raw_pool", '''
import signal
def run():
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU, signal.SIGALRM):
        signal.signal(s, signal.SIG_IGN)
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass''', "timeout"),
    Attack("allocate_8gb", "pool", "def run():\n    return len(bytearray(8 << 30))", "memory_limit"),
    Attack("gradual_memory_growth", "pool", '''
def run():
    hoard = []
    while True:
        hoard.append(bytes(4 << 20))  # calloc'd: grows the address space without touching it''', "memory_limit"),
    Attack("fork_bomb", "raw_pool", '''
import os
def run():
    while True:
        try:
            os.fork()
        except BaseException:
            pass''', "timeout"),
    Attack("double_forked_daemon", "raw_pool", '''
import os, time
def run():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            while True:
                time.sleep(0.01)
        os._exit(0)
    os.wait()
    return "daemon started"''', check=lambda obs, secret: obs == "daemon started"),
    Attack("os_system_rm_canary", "raw_pool", '''
import os
def run():
    status = os.system("rm -rf {canary} {canary_dir} 2>/dev/null")
    try:
        os.remove("{canary}")
        removed = "OK"
    except OSError as exc:
        removed = "ERR " + type(exc).__name__
    return [status, removed]''', check=lambda obs, secret: "OK" not in obs),
    Attack("bare_rm_canary", "bare_pool", '''
import os, shutil
def run():
    try:
        shutil.rmtree("{canary_dir}")
        return "OK"
    except OSError as exc:
        return "ERR " + type(exc).__name__''', check=lambda obs, secret: obs.startswith("ERR")),
    Attack("connect_host_listener", "raw_pool", '''
import socket
def run():
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=0.5)
        return "OK"
    except OSError as exc:
        return "ERR " + type(exc).__name__''', check=lambda obs, secret: obs.startswith("ERR")),
    Attack("bare_connect_host_listener", "bare_pool", '''
import socket
def run():
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=0.5)
        return "OK"
    except OSError as exc:
        return "ERR " + type(exc).__name__''', check=lambda obs, secret: obs.startswith("ERR")),
    Attack("dns_lookup", "bare_pool", '''
import socket
def run():
    try:
        return "OK " + str(socket.getaddrinfo("sandbox-probe.invalid", 80))
    except OSError as exc:
        return "ERR " + type(exc).__name__''', check=lambda obs, secret: obs.startswith("ERR")),
    Attack("connect_raw_test_net_ip", "bare_pool", '''
import socket
def run():
    try:
        socket.create_connection(("192.0.2.1", 80), timeout=0.5)
        return "OK"
    except OSError as exc:
        return "ERR " + type(exc).__name__''', check=lambda obs, secret: obs.startswith("ERR")),
    Attack("read_secrets", "bare_pool", '''
import os
def run():
    found = [repr(dict(os.environ))]
    for path in ("/proc/1/environ", "/proc/self/environ", "/proc/2/environ"):
        try:
            found.append(open(path, "rb").read().decode(errors="replace"))
        except OSError as exc:
            found.append("ERR " + type(exc).__name__)
    return found''', check=lambda obs, secret: secret not in obs and "'PATH': '/usr/bin:/bin'" in obs),
    Attack("read_etc_shadow", "bare_pool", '''
def run():
    out = []
    for path in ("/etc/shadow", "/etc/passwd", "/root/.bashrc", "/proc/1/root/etc/shadow"):
        try:
            out.append("OK " + open(path).read()[:20])
        except OSError as exc:
            out.append("ERR " + type(exc).__name__)
    return out''', check=lambda obs, secret: "OK" not in obs),
    Attack("write_outside_scratch", "bare_pool", '''
def run():
    out = []
    for path in ("/evil", "/usr/evil", "/etc/evil", "/opt/sandbox/python/evil", "{canary}",
                 "{canary_dir}/evil", "/proc/sys/kernel/hostname", "/dev/evil", "/dev/shm/evil"):
        try:
            open(path, "w").write("x")
            out.append("OK " + path)
        except OSError as exc:
            out.append("ERR " + type(exc).__name__)
    return out''', check=lambda obs, secret: "OK" not in obs and "ERR" in obs),
    Attack("fill_scratch_disk", "raw_pool", '''
import errno
def run():
    written = 0
    for i in range(100):
        try:
            with open(f"/tmp/fill{{i}}", "wb") as handle:
                for _ in range(4):
                    handle.write(b"x" * (1 << 20))
                    handle.flush()
                    written += 1
        except OSError as exc:
            return [errno.errorcode[exc.errno], written]
    return ["OK", written]''', check=lambda obs, secret: "ENOSPC" in obs and first_int(obs, 1) <= 16),
    Attack("exceed_file_size_limit", "raw_pool", '''
import errno
def run():
    try:
        with open("/tmp/big", "wb") as handle:
            handle.write(b"x" * (12 << 20))
        return "OK"
    except OSError as exc:
        return errno.errorcode[exc.errno]''', check=lambda obs, secret: obs == "EFBIG"),
    Attack("flood_stdout", "raw_pool", '''
import os, sys
def run():
    for _ in range(50000):
        print("x" * 100)
    for _ in range(50):
        os.write(1, b"y" * (1 << 20))
        os.write(2, b"z" * (1 << 20))
    sys.__stdout__.write("w" * 1000)
    return "flooded"''', check=lambda obs, secret: obs == "flooded"),
    Attack("exhaust_file_descriptors", "raw_pool", '''
def run():
    handles = []
    try:
        while True:
            handles.append(open("/dev/null"))
    except OSError as exc:
        return [len(handles), type(exc).__name__]''', check=lambda obs, secret: first_int(obs) < 64),
    Attack("segfault_ctypes", "raw_pool", "import ctypes\ndef run():\n    ctypes.string_at(0)", "crash"),
    Attack("kill_all_processes", "raw_pool", '''
import os, signal
def run():
    try:
        os.kill(-1, signal.SIGKILL)
        return "OK"
    except OSError as exc:
        return "ERR " + type(exc).__name__''', check=lambda obs, secret: obs == "ERR PermissionError"),
    Attack("kill_zygote", "raw_pool", '''
import os, signal
def run():
    out = []
    for sig in (signal.SIGKILL, signal.SIGSTOP):
        try:
            os.kill(1, sig)
            out.append("OK")
        except OSError as exc:
            out.append("ERR " + type(exc).__name__)
    return out''', check=lambda obs, secret: "OK" not in obs),
    Attack("unshare_mount_ptrace", "raw_pool", '''
import ctypes, os
def run():
    libc = ctypes.CDLL(None, use_errno=True)
    results = [libc.unshare(0x10000000), libc.unshare(0x00020000),
               libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
               libc.ptrace(16, 1, None, None), libc.chroot(b"/tmp")]
    return results''', check=lambda obs, secret: obs == "[-1, -1, -1, -1, -1]"),
    Attack("bare_unshare_mount", "bare_pool", '''
import ctypes, os
def run():
    libc = ctypes.CDLL(None, use_errno=True)
    return [libc.unshare(0x10000000), libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
            libc.ptrace(16, 1, None, None)]''', check=lambda obs, secret: obs == "[-1, -1, -1]"),
    Attack("thread_bomb", "raw_pool", '''
import threading, time
def run():
    threads = []
    try:
        while True:
            t = threading.Thread(target=time.sleep, args=(30,), daemon=True)
            t.start()
            threads.append(t)
    except BaseException as exc:
        return [len(threads), type(exc).__name__]''', check=lambda obs, secret: first_int(obs) < 8),
    Attack("deep_recursion", "pool", "def run():\n    return run() + 1", "exception"),
    Attack("deep_recursion_c_stack", "raw_pool", '''
import sys
sys.setrecursionlimit(10**8)
def run():
    return sorted([0], key=lambda _: run())''', "crash"),
    Attack("write_pid1_memory", "raw_pool", PROC_MEM_WRITE, check=lambda obs, secret: "OK" not in obs),
    Attack("bare_write_pid1_memory", "bare_pool", PROC_MEM_WRITE,
           check=lambda obs, secret: "OK" not in obs),
    Attack("pid1_is_the_filtered_zygote", "raw_pool", '''
def run():
    fields = dict(line.split(":", 1) for line in open("/proc/1/status").read().splitlines())
    return [fields["Seccomp"].strip(), fields["NoNewPrivs"].strip(), open("/proc/1/cmdline").read()]''',
           check=lambda obs, secret: obs.startswith("['2', '1', ") and "_worker.py" in obs),
    Attack("sysv_ipc_and_mqueue_refused", "raw_pool", IPC_CREATE,
           check=lambda obs, secret: obs == "[-1, -1, -1, -1]"),
    Attack("escape_via_module_attributes", "pool", '''
import random
def run():
    return random._os.getuid()''', check=lambda obs, secret: obs == "65534"),
    Attack("forbidden_import_os", "pool", "import os\ndef run():\n    return os.getcwd()",
           "forbidden_import"),
    Attack("forbidden_dunder_import", "pool", "def run():\n    return __import__('subprocess')",
           "forbidden_import"),
    Attack("open_is_hidden", "pool", "def run():\n    return open('/etc/passwd').read()", "exception"),
]


@pytest.fixture(scope="module")
def listener():
    """A host TCP service on 127.0.0.1 that counts the connections it accepts."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack(attack, request, canary, listener, secret, clean_after):
    port, accepted = listener
    pool = request.getfixturevalue(attack.pool)
    clean_after.append(pool)
    source = WRAPPER.format(body=attack.body.format(canary=canary, canary_dir=canary.parent, port=port))
    if attack.expect_kind:
        with pytest.raises(SandboxFailure) as info:  # at load (module level) or at reset
            with pool.load(source) as env:
                env.reset(0)
        assert info.value.failure.kind == attack.expect_kind, info.value.failure
    else:
        with pool.load(source) as env:
            obs = env.reset(0).obs
        assert attack.check(obs, secret), obs
    assert accepted == []


def test_daemon_is_gone_after_close(raw_pool, clean_after):
    """The double-forked daemon is alive while its episode runs and gone after close."""
    clean_after.append(raw_pool)
    body = [a for a in ATTACKS if a.name == "double_forked_daemon"][0].body
    env = raw_pool.load(WRAPPER.format(body=body))
    assert env.reset(0).obs == "daemon started"
    assert len(env.worker.sandbox_pids()) == 3  # zygote, instance, daemon
    env.close()
    assert len(settled_pids(env.worker, 2)) == 2  # zygote, new idle spare


def test_bare_kill_all_spares_the_zygote(bare_pool, clean_after):
    """Without seccomp, kill(-1) still cannot take down the zygote: it is pid 1 of the sandbox's
    pid namespace, and the kernel drops signals sent to a namespace's init from inside it. The
    caller survives, the worker stays up and keeps serving (checked by ``clean_after``)."""
    clean_after.append(bare_pool)
    body = ("import os\ndef run():\n    try:\n        os.kill(-1, 9)\n"
            "    except ProcessLookupError:\n        pass\n    return 'survived'")
    with bare_pool.load(WRAPPER.format(body=body)) as env:
        assert env.reset(0).obs == "survived"
    assert env.worker.alive


def test_scratch_is_emptied_between_instances():
    """What one instance leaves in /tmp (even a locked directory) is gone for the next one."""
    from testbeds.spade.sandbox import SandboxConfig, SandboxPool

    writer = '''
import os
def run():
    os.makedirs("/tmp/locked/inner")
    open("/tmp/locked/inner/note", "w").write("from the last episode")
    open("/tmp/leak.txt", "w").write("leak")
    os.chmod("/tmp/locked/inner", 0)
    os.chmod("/tmp/locked", 0o500)
    return sorted(os.listdir("/tmp"))'''
    reader = "import os\ndef run():\n    return sorted(os.listdir('/tmp'))"
    config = SandboxConfig(workers=1, enforce_import_allowlist=False, allow_degraded=True)
    with SandboxPool(config) as pool:
        with pool.load(WRAPPER.format(body=writer)) as env:
            assert env.reset(0).obs == "['leak.txt', 'locked']"
        with pool.load(WRAPPER.format(body=reader)) as env:
            assert env.reset(0).obs == "[]"


def test_output_is_capped(raw_pool):
    body = "def run():\n    for _ in range(20000):\n        print('x' * 100)\n    return 'done'"
    with raw_pool.load(WRAPPER.format(body=body)) as env:
        result = env.reset(0)
    assert result.obs == "done"
    assert result.output.startswith("x" * 100)
    assert len(result.output) < raw_pool.config.max_output_chars + 100
    assert "characters of output dropped" in result.output


def test_sandbox_runs_unprivileged_without_host_environment(bare_pool):
    body = '''
import os
def run():
    return [os.getuid(), os.getgid(), sorted(os.environ), os.getcwd(), sorted(os.listdir("/"))]'''
    with bare_pool.load(WRAPPER.format(body=body)) as env:
        obs = env.reset(0).obs
    variables = "['HOME', 'LANG', 'LD_LIBRARY_PATH', 'PATH', 'PWD', 'PYTHONHASHSEED']"
    assert obs.startswith(f"[65534, 65534, {variables}, '/tmp'")
    assert "'root'" not in obs and "'work'" not in obs


def test_sandbox_dies_with_its_host(tmp_path):
    """SIGKILL the host process: bubblewrap's die-with-parent takes every sandbox process down."""
    script = tmp_path / "host.py"
    script.write_text(
        "import sys, time\n"
        "from testbeds.spade.sandbox import SandboxConfig, SandboxPool\n"
        "pool = SandboxPool(SandboxConfig(workers=1))\n"
        "pool.start()\n"
        "handle = pool.load('class SleepEnv:\\n    pass\\n')\n"
        "worker = pool.workers[0]\n"
        "print(' '.join(map(str, [worker.proc.pid, *worker.sandbox_pids()])), flush=True)\n"
        "time.sleep(60)\n")
    root = Path(__file__).resolve().parents[2]
    host = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            cwd=root, env=os.environ | {"PYTHONPATH": str(root)})
    pids = [int(p) for p in host.stdout.readline().split()]
    assert len(pids) == 3  # bwrap, the zygote (pid 1 inside), the loaded instance
    host.kill()
    host.wait()
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)
